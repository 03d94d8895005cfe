"""Writes scan_oracle.json: NumPy's running folds (cumsum, cumprod, maximum.accumulate,
minimum.accumulate), forward and reversed, along every axis of a few shapes, in f32, f64 and
i32, with special values among the float inputs; and linrec_oracle.json: the linear recurrence
`y[i] = a[i] * y[i-1] + x[i]` from `y[-1] = -0`, computed by NumPy one step at a time in the
arrays' dtype (the product, then the sum, each rounded: NumPy never fuses them), with special
values among the float operands and coefficients.

Run from this folder with NumPy installed: `python3 make_scan_oracle.py`. The reversed scan is
NumPy's scan of the flipped array, flipped back (JAX's `reverse=True`).
"""

import json

import numpy as np

OPS = {
    "cumsum": lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype),
    "cumprod": lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype),
    "cummax": lambda x, axis: np.maximum.accumulate(x, axis=axis),
    "cummin": lambda x, axis: np.minimum.accumulate(x, axis=axis),
}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 1e30, -1e30]
SHAPES = [(7,), (3, 5), (2, 3, 4), (1, 6), (4, 1)]


def encode(array):
    if array.dtype == np.float32:
        return ["%08x" % v for v in array.ravel().view(np.uint32)]
    if array.dtype == np.float64:
        return ["%016x" % v for v in array.ravel().view(np.uint64)]
    return [int(v) for v in array.ravel()]


def inputs(rng, shape, dtype, special_rate):
    n = int(np.prod(shape))
    if dtype == "i32":
        # Products of up to a dozen factors of this size wrap around.
        return rng.integers(-20, 21, size=n).astype(np.int32).reshape(shape)
    values = rng.uniform(-4.0, 4.0, size=n)
    # Products stay in range more often with factors near one.
    near_one = rng.uniform(size=n) < 0.3
    values[near_one] = rng.uniform(0.5, 1.5, size=int(near_one.sum()))
    return with_specials(rng, values, shape, dtype, special_rate)


def with_specials(rng, values, shape, dtype, special_rate):
    """`values` with each replaced by a special value at `special_rate`, as `dtype`."""
    for i in range(len(values)):
        if rng.uniform() < special_rate:
            values[i] = SPECIALS[rng.integers(len(SPECIALS))]
    return values.astype(np.float32 if dtype == "f32" else np.float64).reshape(shape)


def main():
    rng = np.random.default_rng(20261127)
    cases = []
    for dtype in ["f32", "f64", "i32"]:
        for shape in SHAPES:
            for special_rate in ([0.0, 0.25] if dtype != "i32" else [0.0]):
                x = inputs(rng, shape, dtype, special_rate)
                for op, fold in OPS.items():
                    for axis in range(len(shape)):
                        for reverse in [False, True]:
                            with np.errstate(all="ignore"):
                                if reverse:
                                    out = np.flip(fold(np.flip(x, axis), axis), axis)
                                else:
                                    out = fold(x, axis)
                            assert out.dtype == x.dtype
                            cases.append(
                                {
                                    "op": op,
                                    "dtype": dtype,
                                    "shape": list(shape),
                                    "axis": axis,
                                    "reverse": reverse,
                                    "input": encode(x),
                                    "out": encode(np.ascontiguousarray(out)),
                                }
                            )
    with open("scan_oracle.json", "w") as f:
        json.dump({"numpy": np.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(len(cases), "cases")


def linrec(x, a, axis):
    """The recurrence along `axis`, one NumPy step per element of the axis."""
    x = np.moveaxis(x, axis, 0)
    a = np.moveaxis(a, axis, 0)
    y = np.empty_like(x)
    acc = np.full(x.shape[1:], -0.0 if x.dtype != np.int32 else 0, dtype=x.dtype)
    for i in range(x.shape[0]):
        acc = a[i] * acc + x[i]
        assert acc.dtype == x.dtype
        y[i] = acc
    return np.moveaxis(y, 0, axis)


def coefficients(rng, shape, dtype, special_rate):
    n = int(np.prod(shape))
    if dtype == "i32":
        return rng.integers(-3, 4, size=n).astype(np.int32).reshape(shape)
    # Mostly decays and gains near one (a filter's), some past one in magnitude.
    values = rng.uniform(-1.2, 1.2, size=n)
    return with_specials(rng, values, shape, dtype, special_rate)


def main_linrec():
    rng = np.random.default_rng(20261128)
    cases = []
    for dtype in ["f32", "f64", "i32"]:
        for shape in SHAPES + [(40,)]:
            for special_rate in ([0.0, 0.2] if dtype != "i32" else [0.0]):
                x = inputs(rng, shape, dtype, special_rate)
                a = coefficients(rng, shape, dtype, special_rate)
                for axis in range(len(shape)):
                    for reverse in [False, True]:
                        with np.errstate(all="ignore"):
                            if reverse:
                                out = np.flip(linrec(np.flip(x, axis), np.flip(a, axis), axis), axis)
                            else:
                                out = linrec(x, a, axis)
                        cases.append(
                            {
                                "op": "linrec",
                                "dtype": dtype,
                                "shape": list(shape),
                                "axis": axis,
                                "reverse": reverse,
                                "input": encode(x),
                                "coef": encode(a),
                                "out": encode(np.ascontiguousarray(out)),
                            }
                        )
    with open("linrec_oracle.json", "w") as f:
        json.dump({"numpy": np.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(len(cases), "linrec cases")


if __name__ == "__main__":
    main()
    main_linrec()
