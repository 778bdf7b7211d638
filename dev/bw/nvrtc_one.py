#!/usr/bin/env python3
"""dev/bw/nvrtc_one.py - compile one kernel source with NVRTC the way libfajit does (same
options: -std=c++17 -default-device --ptxas-options=-v -DFJ_NVRTC=1), headers from
src/kernels_src, a preamble of -D defines; prints the log, optionally writes the cubin.
Lab tool (no GPU needed): python3 dev/bw/nvrtc_one.py attn_fwd_sm100.cu sm_100a \
    FJ_DTYPE=1 FJ_HEAD_DIM=128 ... [--cubin out.cubin]"""
import ctypes, os, sys

src_dir = os.path.join(os.path.dirname(__file__), '..', '..', 'src', 'kernels_src')
args = sys.argv[1:]
cubin = None
if '--cubin' in args:
    i = args.index('--cubin'); cubin = args[i + 1]; del args[i:i + 2]
name, arch, defs = args[0], args[1], args[2:]
nv = ctypes.CDLL('libnvrtc.so.13' if os.path.exists('/usr/local/cuda/lib64/libnvrtc.so.13') else 'libnvrtc.so')
pre = ''.join('#define %s %s\n' % tuple(d.split('=', 1)) for d in defs)
text = pre + open(os.path.join(src_dir, name)).read()
hdrs = sorted(f for f in os.listdir(src_dir) if f.endswith(('.cuh', '.h')))
hsrc = [open(os.path.join(src_dir, h)).read().encode() for h in hdrs]
prog = ctypes.c_void_p()
H = ctypes.c_char_p * len(hdrs)
rc = nv.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), name.encode(), len(hdrs),
                           H(*hsrc), H(*[h.encode() for h in hdrs]))
assert rc == 0, rc
opts = [b'-std=c++17', b'-default-device', b'--ptxas-options=-v', b'-DFJ_NVRTC=1', b'-arch=' + arch.encode()]
O = ctypes.c_char_p * len(opts)
rc = nv.nvrtcCompileProgram(prog, len(opts), O(*opts))
n = ctypes.c_size_t()
nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
nv.nvrtcGetProgramLog(prog, log)
print(log.value.decode(errors='replace'))
if rc == 0 and cubin:
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetCUBIN(prog, buf)
    open(cubin, 'wb').write(buf.raw)
sys.exit(rc)
