"""CasADi's generated C for `cargo xtask export-bench`.

Builds the peers script's K4, K5 and K6 as CasADi SX functions of n-element inputs and writes
CasADi's C for each (CodeGenerator with casadi_real=float, as ../shared/peers/peers.py does)
into OUT_DIR as K<k>_<n>.c; the function is named K<k>_<n>, with CasADi's ABI
`int f(const float **arg, float **res, long long *iw, float *w, int mem)`.

    python casadi_gen.py OUT_DIR N [N ...]

Prints one JSON line: the CasADi version and, per function, its work sizes.
"""
import json
import os
import sys

import casadi as ca

KP, KI, KD = 1.2, 0.3, 0.05


def build(kernel, n):
    n_in = {"K4": 2, "K5": 2, "K6": 3}[kernel]
    s = [ca.SX.sym(f"i{j}", n) for j in range(n_in)]
    if kernel == "K4":
        out = ca.sin(s[0] * 2.0) + s[1]
    elif kernel == "K5":
        x, y = s
        out = ((x * 1.5 + y) * 0.5 - ca.sin(x)) * ca.cos(y) + ca.exp(-x * x)
    else:
        out = ca.fmin(ca.fmax(KP * s[0] + KI * s[1] + KD * s[2], -1.0), 1.0)
    return ca.Function(f"{kernel}_{n}", s, [out])


def main():
    out_dir = os.path.abspath(sys.argv[1])
    sizes = [int(a) for a in sys.argv[2:]]
    os.makedirs(out_dir, exist_ok=True)
    functions = {}
    cwd = os.getcwd()
    os.chdir(out_dir)
    try:
        for n in sizes:
            for kernel in ("K4", "K5", "K6"):
                f = build(kernel, n)
                name = f"{kernel}_{n}"
                options = {"casadi_real": "float", "casadi_int": "long long int", "with_header": False}
                generator = ca.CodeGenerator(f"{name}.c", options)
                generator.add(f)
                generator.generate()
                functions[name] = {"sz_arg": f.sz_arg(), "sz_res": f.sz_res(), "sz_iw": f.sz_iw(), "sz_w": f.sz_w()}
    finally:
        os.chdir(cwd)
    print(json.dumps({"casadi": ca.__version__, "functions": functions}))


if __name__ == "__main__":
    main()
