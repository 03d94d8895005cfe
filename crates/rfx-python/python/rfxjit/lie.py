"""`rfxjit.lie`: SO(2), SO(3), SE(2) and SE(3) written with the NumPy functions rfx traces, so
they run inside `rfxjit.jit`, differentiate with `rfxjit.grad`/`rfxjit.jacobian`, map with
`rfxjit.vmap`, and also run eagerly on NumPy arrays. The names, storage and conventions are
those of Rust's `rfx::lie` (see `docs/lie.md`):

| group | element (last axis) | tangent |
|---|---|---|
| SO(2) | `[cos θ, sin θ]` | `[θ]` |
| SO(3) | unit quaternion `[w, x, y, z]` (Hamilton) | `ω = θ · axis` |
| SE(2) | `[cos θ, sin θ, x, y]` | `[ρx, ρy, θ]` |
| SE(3) | `[w, x, y, z, tx, ty, tz]` | `[ρ, ω]` (translation part first) |

Axes before the last are a batch and broadcast. `compose(a, b)` is `a ∘ b`, `between(a, b)` is
`a⁻¹ ∘ b`, `interp(a, b, t)` is `a ∘ Exp(t Log(a⁻¹ ∘ b))`; the right Jacobian `Jr` satisfies
`Exp(τ + δ) ≈ Exp(τ) ∘ Exp(Jr(τ) δ)`, the left one `Exp(τ + δ) ≈ Exp(Jl(τ) δ) ∘ Exp(τ)`, and
`*_jr_inv`/`*_jl_inv` are the Jacobians of `Log`. The `0/0` terms at `θ = 0` switch to their
Taylor series below a threshold derived from the series' truncation error in the array's
dtype, with the safe-where substitution that keeps reverse-mode derivatives finite.
"""

import math

import numpy as np

from . import numpy as _rnp
from ._errors import TraceError

__all__ = [
    "se2_act", "se2_act_jacobians", "se2_adjoint", "se2_between", "se2_compose",
    "se2_compose_jacobians", "se2_exp", "se2_interp", "se2_inverse", "se2_inverse_jacobian",
    "se2_jl", "se2_jl_inv", "se2_jr", "se2_jr_inv", "se2_log",
    "se3_act", "se3_act_jacobians", "se3_adjoint", "se3_between", "se3_compose",
    "se3_compose_jacobians", "se3_exp", "se3_interp", "se3_inverse", "se3_inverse_jacobian",
    "se3_jl", "se3_jl_inv", "se3_jr", "se3_jr_inv", "se3_log", "se3_to_matrix",
    "so2_act", "so2_between", "so2_compose", "so2_exp", "so2_interp", "so2_inverse", "so2_log",
    "so3_act", "so3_act_jacobians", "so3_between", "so3_compose", "so3_compose_jacobians",
    "so3_exp", "so3_exp_with_jacobians", "so3_interp", "so3_inverse", "so3_inverse_jacobian", "so3_jl", "so3_jl_inv",
    "so3_jr", "so3_jr_inv", "so3_log", "so3_log_with_jacobians", "so3_to_matrix",
]

# -- series -----------------------------------------------------------------------------------

_TERMS = 5


def _roundoff(dtype):
    return 2.0 ** -53 if np.dtype(dtype) == np.float64 else 2.0 ** -24


def _sign(k):
    return -1.0 if k % 2 else 1.0


class _Series:
    """A function of `x = θ²`: Taylor coefficients and a closed form for a safe `x > 0`."""

    def __init__(self, coefficient, closed):
        self.coefficient = coefficient
        self.closed = closed

    def threshold(self, dtype):
        """Below this `x` the first omitted term is under half the unit roundoff."""
        lead = abs(self.coefficient(0))
        omitted = abs(self.coefficient(_TERMS))
        return (_roundoff(dtype) * lead / (2.0 * omitted)) ** (1.0 / _TERMS)

    def horner(self, x):
        acc = x * self.coefficient(_TERMS - 1) + self.coefficient(_TERMS - 2)
        for k in range(_TERMS - 3, -1, -1):
            acc = acc * x + self.coefficient(k)
        return acc

    def __call__(self, x):
        small = x < self.threshold(x.dtype)
        near = self.horner(np.where(small, x, 0.0))
        far = self.closed(np.where(small, 1.0, x))
        return np.where(small, near, far)


_f = math.factorial


def _half_sin_closed(x):
    s = np.sin(np.sqrt(x) * 0.5)
    return s * s * 2.0 / x


def _half_sinc_closed(x):
    theta = np.sqrt(x)
    return np.sin(theta * 0.5) / theta


def _sinc_closed(x):
    theta = np.sqrt(x)
    return np.sin(theta) / theta


def _theta_minus_sin_closed(x):
    theta = np.sqrt(x)
    return (theta - np.sin(theta)) / (theta * x)


def _c2_closed(x):
    s = np.sin(np.sqrt(x) * 0.5)
    return (x * 0.5 - s * s * 2.0) / (x * x)


def _c3_closed(x):
    theta = np.sqrt(x)
    return (theta * 2.0 - np.sin(theta) * 3.0 + theta * np.cos(theta)) / (theta * x * x * 2.0)


def _inv_cot_closed(x):
    half = np.sqrt(x) * 0.5
    return 1.0 / x - np.cos(half) / (np.sin(half) * np.sqrt(x) * 2.0)


def _atan_closed(x):
    y = np.sqrt(x)
    return np.arctan(y) / y


_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730]

_HALF_COS = _Series(lambda k: _sign(k) / (4.0 ** k * _f(2 * k)), lambda x: np.cos(np.sqrt(x) * 0.5))
_HALF_SINC = _Series(lambda k: _sign(k) / (2.0 * 4.0 ** k * _f(2 * k + 1)), _half_sinc_closed)
_SINC = _Series(lambda k: _sign(k) / _f(2 * k + 1), _sinc_closed)
_ONE_MINUS_COS = _Series(lambda k: _sign(k) / _f(2 * k + 2), _half_sin_closed)
_THETA_MINUS_SIN = _Series(lambda k: _sign(k) / _f(2 * k + 3), _theta_minus_sin_closed)
_SE3_C2 = _Series(lambda k: _sign(k) / _f(2 * k + 4), _c2_closed)
_SE3_C3 = _Series(lambda k: _sign(k) * (k + 1) / _f(2 * k + 5), _c3_closed)
_INV_COT = _Series(lambda k: _sign(k) * _BERNOULLI[min(k, _TERMS)] / _f(2 * k + 2), _inv_cot_closed)
_ATAN = _Series(lambda k: _sign(k) / (2 * k + 1), _atan_closed)
# The series `so3_exp` and `so3_exp_with_jacobians` (with `so3_jr`, `so3_jl`) take below one
# threshold, the smallest of theirs.
_EXP = (_HALF_COS, _HALF_SINC)
_EXP_WITH_JACOBIANS = (_HALF_COS, _HALF_SINC, _THETA_MINUS_SIN)

# -- components -------------------------------------------------------------------------------


def _float(x):
    x = _rnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    return x


def _split(x, n, name):
    x = _float(x)
    if x.ndim == 0 or x.shape[-1] != n:
        raise TraceError(f"{name}: the last axis must have {n} elements, got shape {tuple(x.shape)}")
    return [x[..., i] for i in range(n)]


def _stack(parts):
    shape = np.broadcast_shapes(*[tuple(np.shape(p)) for p in parts])
    return np.stack([np.broadcast_to(p, shape) for p in parts], axis=-1)


def _matrix(rows):
    flat = _stack([c for row in rows for c in row])
    return flat.reshape(tuple(flat.shape[:-1]) + (len(rows), len(rows[0])))


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _skew(v):
    z = np.zeros_like(v[0])
    return [[z, -v[2], v[1]], [v[2], z, -v[0]], [-v[1], v[0], z]]


def _mat_mul(a, b):
    return [[a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j] for j in range(3)] for i in range(3)]


def _mat_vec(m, v):
    return [m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2] for i in range(3)]


def _transpose(m):
    return [[m[j][i] for j in range(3)] for i in range(3)]


def _neg(m):
    return [[-c for c in row] for row in m]


def _identity(like, n=3):
    z, o = np.zeros_like(like), np.ones_like(like)
    return [[o if i == j else z for j in range(n)] for i in range(n)]


def _blocks(a, b, c, d):
    return [a[i] + b[i] for i in range(3)] + [c[i] + d[i] for i in range(3)]


def _zeros(like):
    z = np.zeros_like(like)
    return [[z] * 3 for _ in range(3)]


def _side(side):
    if side not in ("right", "left"):
        raise TraceError(f"side must be 'right' or 'left', got {side!r}")
    return side


# -- SO(3) --------------------------------------------------------------------------------------


def _half_angle(theta2, series):
    """`θ²` split at the smallest threshold of `series`: `(small, near, far, θ, sin(θ/2),
    cos(θ/2))`, `near` (`far`) being `θ²` where the series (closed forms) are taken and `0`
    (`1`) elsewhere, and `θ = √far`."""
    small = theta2 < min(s.threshold(theta2.dtype) for s in series)
    far = np.where(small, 1.0, theta2)
    theta = np.sqrt(far)
    half = theta * 0.5
    return small, np.where(small, theta2, 0.0), far, theta, np.sin(half), np.cos(half)


def _half_sinc(h):
    """`sin(θ/2)/θ` of a `_half_angle` split."""
    small, near, _, theta, s, _ = h
    return np.where(small, _HALF_SINC.horner(near), s / theta)


def _exp_from(w, h):
    """`Exp(ω)` and `k = sin(θ/2)/θ` of a `_half_angle` split."""
    small, near, _, _, _, c = h
    k = _half_sinc(h)
    return [np.where(small, _HALF_COS.horner(near), c), k * w[0], k * w[1], k * w[2]], k


def _exp_jacobian_coefficients(h, k):
    """`(1 - cos θ)/θ² = 2 k²` and `(θ - sin θ)/θ³` of a split at `_EXP_WITH_JACOBIANS`'
    threshold."""
    small, near, far, theta, s, c = h
    b = np.where(small, _THETA_MINUS_SIN.horner(near), (theta - s * c * 2.0) / (theta * far))
    return k * k * 2.0, b


def _so3_exp(w):
    # One sine and cosine of `θ/2` above the smaller of the two series' thresholds.
    return _exp_from(w, _half_angle(_dot(w, w), _EXP))[0]


def _so3_exp_with_jacobians(w):
    # One sine and cosine of `θ/2` above one threshold on `θ²` (the smallest of the three
    # series' own, `_THETA_MINUS_SIN`'s): `cos(θ/2)`, `k = sin(θ/2)/θ`, `(θ - 2 sin(θ/2)
    # cos(θ/2))/θ³`, and `(1 - cos θ)/θ² = 2 k²` in both regions (see Rust's `so3.rs`).
    h = _half_angle(_dot(w, w), _EXP_WITH_JACOBIANS)
    q, k = _exp_from(w, h)
    a, b = _exp_jacobian_coefficients(h, k)
    return q, _jacobian_form(w, -a, b), _jacobian_form(w, a, b)


def _so3_log_terms(q):
    """`Log(q)` with the sign-normalised `w`, and `‖v‖` and `θ` where the closed form is taken
    (`1` and `2 atan2(1, w)`, harmless, where the series is)."""
    flip = q[0] < 0.0
    w, x, y, z = [np.where(flip, -c, c) for c in q]
    v = [x, y, z]
    n2 = _dot(v, v)
    small = n2 < w * w * _ATAN.threshold(w.dtype)
    w_safe = np.where(small, w, 1.0)
    y2 = np.where(small, n2 / (w_safe * w_safe), 0.0)
    near = _ATAN.horner(y2) * 2.0 / w_safe
    n = np.sqrt(np.where(small, 1.0, n2))
    theta = np.arctan2(n, w) * 2.0
    far = theta / n
    factor = np.where(small, near, far)
    return [c * factor for c in v], w, n, theta


def _so3_log(q):
    return _so3_log_terms(q)[0]


def _so3_log_with_jacobians(q):
    # `1/θ² - cot(θ/2)/(2θ)` with `cot(θ/2) = w/‖v‖`; its closed form is taken only where the
    # log's is (`θ² <= 4‖v‖²/w²`, and 4 times `_ATAN`'s threshold is below `_INV_COT`'s).
    omega, w, n, theta = _so3_log_terms(q)
    theta2 = _dot(omega, omega)
    small = theta2 < _INV_COT.threshold(theta2.dtype)
    near = _INV_COT.horner(np.where(small, theta2, 0.0))
    far = 1.0 / (theta * theta) - w / (n * theta * 2.0)
    b = np.where(small, near, far)
    right, left = np.full_like(theta2, 0.5), np.full_like(theta2, -0.5)
    return omega, _jacobian_form(omega, right, b), _jacobian_form(omega, left, b)


def _qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return [
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ]


def _conj(q):
    return [q[0], -q[1], -q[2], -q[3]]


def _rotate(q, p):
    u = q[1:]
    t = [c * 2.0 for c in _cross(u, p)]
    ut = _cross(u, t)
    return [p[i] + q[0] * t[i] + ut[i] for i in range(3)]


def _rotation(q):
    w, x, y, z = q

    def two(a, b):
        return a * b * 2.0

    return [
        [1.0 - two(y, y) - two(z, z), two(x, y) - two(w, z), two(x, z) + two(w, y)],
        [two(x, y) + two(w, z), 1.0 - two(x, x) - two(z, z), two(y, z) - two(w, x)],
        [two(x, z) - two(w, y), two(y, z) + two(w, x), 1.0 - two(x, x) - two(y, y)],
    ]


def _jacobian_form(w, a, b):
    theta2 = _dot(w, w)
    diagonal = 1.0 - b * theta2
    s = _skew(w)
    return [
        [diagonal + b * w[i] * w[j] if i == j else a * s[i][j] + b * w[i] * w[j] for j in range(3)]
        for i in range(3)
    ]


def _so3_jac(w, side):
    # Both coefficients from one sine and cosine of `θ/2`, as in `_so3_exp_with_jacobians`.
    h = _half_angle(_dot(w, w), _EXP_WITH_JACOBIANS)
    a, b = _exp_jacobian_coefficients(h, _half_sinc(h))
    return _jacobian_form(w, -a if side == "right" else a, b)


def _so3_jac_separate(w, side):
    # Each coefficient from its own series and threshold: SE(3)'s Jacobians take it, whose
    # coupling block takes `(θ - sin θ)/θ³` from the same series (see Rust's `so3.rs`).
    theta2 = _dot(w, w)
    a = _ONE_MINUS_COS(theta2)
    return _jacobian_form(w, -a if side == "right" else a, _THETA_MINUS_SIN(theta2))


def _so3_jac_inv(w, side):
    theta2 = _dot(w, w)
    half = np.full_like(theta2, 0.5 if side == "right" else -0.5)
    return _jacobian_form(w, half, _INV_COT(theta2))


def so3_exp(omega):
    """`Exp(ω)`: the unit quaternion `[cos(θ/2), sin(θ/2) ω/θ]` (`[..., 3]` to `[..., 4]`)."""
    return _stack(_so3_exp(_split(omega, 3, "so3_exp")))


def so3_log(q):
    """`Log(q)` with `‖ω‖ <= π`; `q` and `-q` give the same `ω`; `q` must not be zero."""
    return _stack(_so3_log(_split(q, 4, "so3_log")))


def so3_compose(a, b):
    """`a ∘ b` (the Hamilton product)."""
    return _stack(_qmul(_split(a, 4, "so3_compose"), _split(b, 4, "so3_compose")))


def so3_inverse(q):
    """`q⁻¹` (the conjugate)."""
    return _stack(_conj(_split(q, 4, "so3_inverse")))


def so3_act(q, p):
    """`R(q) p` for points `p` (`[..., 3]`)."""
    return _stack(_rotate(_split(q, 4, "so3_act"), _split(p, 3, "so3_act")))


def so3_between(a, b):
    """`a⁻¹ ∘ b`."""
    return _stack(_qmul(_conj(_split(a, 4, "so3_between")), _split(b, 4, "so3_between")))


def so3_interp(a, b, t):
    """`a ∘ Exp(t Log(a⁻¹ ∘ b))` (slerp along the shorter arc); `t` broadcasts with the batch."""
    qa = _split(a, 4, "so3_interp")
    delta = _so3_log(_qmul(_conj(qa), _split(b, 4, "so3_interp")))
    return _stack(_qmul(qa, _so3_exp([c * t for c in delta])))


def so3_to_matrix(q):
    """The rotation matrix `[..., 3, 3]` (also SO(3)'s adjoint)."""
    return _matrix(_rotation(_split(q, 4, "so3_to_matrix")))


def so3_jr(omega):
    """The right Jacobian of `Exp` at `ω` (`[..., 3, 3]`)."""
    return _matrix(_so3_jac(_split(omega, 3, "so3_jr"), "right"))


def so3_jl(omega):
    """The left Jacobian of `Exp` at `ω`."""
    return _matrix(_so3_jac(_split(omega, 3, "so3_jl"), "left"))


def so3_jr_inv(omega):
    """`Jr(ω)⁻¹` in closed form: the right Jacobian of `Log` at `Exp(ω)` (`‖ω‖ < 2π`)."""
    return _matrix(_so3_jac_inv(_split(omega, 3, "so3_jr_inv"), "right"))


def so3_jl_inv(omega):
    """`Jl(ω)⁻¹` in closed form: the left Jacobian of `Log` at `Exp(ω)`."""
    return _matrix(_so3_jac_inv(_split(omega, 3, "so3_jl_inv"), "left"))


def so3_exp_with_jacobians(omega):
    """`Exp(ω)` with `Jr(ω)` and `Jl(ω)`, `(q, jr, jl)` (`[..., 4]`, `[..., 3, 3]`,
    `[..., 3, 3]`): the values of `so3_exp`, `so3_jr` and `so3_jl`, from one sine and cosine of
    `θ/2` and one series region on `θ²`."""
    q, jr, jl = _so3_exp_with_jacobians(_split(omega, 3, "so3_exp_with_jacobians"))
    return _stack(q), _matrix(jr), _matrix(jl)


def so3_log_with_jacobians(q):
    """`Log(q)` with `Jr⁻¹` and `Jl⁻¹` of it, `(ω, jr_inv, jl_inv)` (`[..., 3]`, `[..., 3, 3]`,
    `[..., 3, 3]`): the values of `so3_log` and `so3_jr_inv`/`so3_jl_inv` of it, with the
    coefficient taken from the quaternion (`cot(θ/2) = w/‖v‖`), so `atan2` is the only
    transcendental function."""
    omega, jr_inv, jl_inv = _so3_log_with_jacobians(_split(q, 4, "so3_log_with_jacobians"))
    return _stack(omega), _matrix(jr_inv), _matrix(jl_inv)


def so3_compose_jacobians(a, b, side="right"):
    """The Jacobians of `a ∘ b` in `a` and `b`: right `(R(b)ᵀ, I)`, left `(I, R(a))`."""
    qa, qb = _split(a, 4, "so3_compose_jacobians"), _split(b, 4, "so3_compose_jacobians")
    eye = _identity(qa[0] * qb[0])
    if _side(side) == "right":
        return _matrix(_transpose(_rotation(qb))), _matrix(eye)
    return _matrix(eye), _matrix(_rotation(qa))


def so3_act_jacobians(q, p, side="right"):
    """The Jacobians of `q · p` in `q` and `p`: right `(-R [p]×, R)`, left `(-[R p]×, R)`."""
    q, p = _split(q, 4, "so3_act_jacobians"), _split(p, 3, "so3_act_jacobians")
    r = _rotation(q)
    if _side(side) == "right":
        jq = _neg(_mat_mul(r, _skew(p)))
    else:
        jq = _neg(_skew(_rotate(q, p)))
    return _matrix(jq), _matrix(r)


def so3_inverse_jacobian(q, side="right"):
    """The Jacobian of `q⁻¹` in `q`: right `-R(q)`, left `-R(q)ᵀ`."""
    r = _rotation(_split(q, 4, "so3_inverse_jacobian"))
    return _matrix(_neg(r if _side(side) == "right" else _transpose(r)))


# -- SE(3) --------------------------------------------------------------------------------------


def _pose(x, name):
    c = _split(x, 7, name)
    return c[:4], c[4:]


def _pose_out(q, t):
    return _stack(list(q) + list(t))


def _se3_exp(rho, w):
    q, _, jl = _so3_exp_with_jacobians(w)
    return q, _mat_vec(jl, rho)


def _se3_log(q, t):
    w = _so3_log(q)
    return _mat_vec(_so3_jac_inv(w, "left"), t), w


def _se3_compose(a, b):
    (qa, ta), (qb, tb) = a, b
    moved = _rotate(qa, tb)
    return _qmul(qa, qb), [ta[i] + moved[i] for i in range(3)]


def _se3_inverse(x):
    q, t = x
    qi = _conj(q)
    return qi, [-c for c in _rotate(qi, t)]


def _se3_adjoint(x):
    q, t = x
    r = _rotation(q)
    return _blocks(r, _mat_mul(_skew(t), r), _zeros(q[0]), r)


def _coupling(rho, w):
    theta2 = _dot(w, w)
    a, c2, c3 = _THETA_MINUS_SIN(theta2), _SE3_C2(theta2), _SE3_C3(theta2)
    v, o = _skew(rho), _skew(w)
    ov, vo = _mat_mul(o, v), _mat_mul(v, o)
    ovo = _mat_mul(ov, o)
    oov, voo = _mat_mul(o, ov), _mat_mul(vo, o)
    ovoo, oovo = _mat_mul(ovo, o), _mat_mul(o, ovo)
    return [
        [
            v[i][j] * 0.5
            + a * (ov[i][j] + vo[i][j] + ovo[i][j])
            + c2 * (oov[i][j] + voo[i][j] - ovo[i][j] * 3.0)
            + c3 * (ovoo[i][j] + oovo[i][j])
            for j in range(3)
        ]
        for i in range(3)
    ]


def _se3_jacobian(xi, side, inverse, name):
    c = _split(xi, 6, name)
    rho, w = c[:3], c[3:]
    if _side(side) == "right":
        rho, w = [-x for x in rho], [-x for x in w]
    q = _coupling(rho, w)
    z = _zeros(w[0])
    if inverse:
        j = _so3_jac_inv(w, "left")
        return _matrix(_blocks(j, _neg(_mat_mul(_mat_mul(j, q), j)), z, j))
    j = _so3_jac_separate(w, "left")
    return _matrix(_blocks(j, q, z, j))


def se3_exp(xi):
    """`Exp([ρ, ω]) = (Exp(ω), Jl(ω) ρ)` (`[..., 6]` to `[..., 7]`)."""
    c = _split(xi, 6, "se3_exp")
    return _pose_out(*_se3_exp(c[:3], c[3:]))


def se3_log(x):
    """`Log(x) = [Jl(ω)⁻¹ t, ω]` with `ω = Log(q)` (`[..., 7]` to `[..., 6]`)."""
    rho, w = _se3_log(*_pose(x, "se3_log"))
    return _stack(rho + w)


def se3_compose(a, b):
    """`a ∘ b = (q_a q_b, t_a + R_a t_b)`."""
    return _pose_out(*_se3_compose(_pose(a, "se3_compose"), _pose(b, "se3_compose")))


def se3_inverse(x):
    """`x⁻¹ = (q*, -Rᵀ t)`."""
    return _pose_out(*_se3_inverse(_pose(x, "se3_inverse")))


def se3_act(x, p):
    """`R p + t` for points `p` (`[..., 3]`)."""
    q, t = _pose(x, "se3_act")
    moved = _rotate(q, _split(p, 3, "se3_act"))
    return _stack([moved[i] + t[i] for i in range(3)])


def se3_between(a, b):
    """`a⁻¹ ∘ b`."""
    return _pose_out(*_se3_compose(_se3_inverse(_pose(a, "se3_between")), _pose(b, "se3_between")))


def se3_interp(a, b, t):
    """`a ∘ Exp(t Log(a⁻¹ ∘ b))` (a screw motion); `t` broadcasts with the batch."""
    pa = _pose(a, "se3_interp")
    rho, w = _se3_log(*_se3_compose(_se3_inverse(pa), _pose(b, "se3_interp")))
    step = _se3_exp([c * t for c in rho], [c * t for c in w])
    return _pose_out(*_se3_compose(pa, step))


def se3_to_matrix(x):
    """The homogeneous matrix `[[R, t], [0, 1]]` (`[..., 4, 4]`)."""
    q, t = _pose(x, "se3_to_matrix")
    r = _rotation(q)
    z, o = np.zeros_like(q[0]), np.ones_like(q[0])
    return _matrix([r[0] + [t[0]], r[1] + [t[1]], r[2] + [t[2]], [z, z, z, o]])


def se3_adjoint(x):
    """`Ad(x) = [[R, [t]× R], [0, R]]` (`[..., 6, 6]`)."""
    return _matrix(_se3_adjoint(_pose(x, "se3_adjoint")))


def se3_jr(xi):
    """The right Jacobian of `Exp` at `[ρ, ω]` (`[..., 6, 6]`)."""
    return _se3_jacobian(xi, "right", False, "se3_jr")


def se3_jl(xi):
    """The left Jacobian of `Exp` at `[ρ, ω]`."""
    return _se3_jacobian(xi, "left", False, "se3_jl")


def se3_jr_inv(xi):
    """`Jr(ξ)⁻¹` in closed form: the right Jacobian of `Log` at `Exp(ξ)`."""
    return _se3_jacobian(xi, "right", True, "se3_jr_inv")


def se3_jl_inv(xi):
    """`Jl(ξ)⁻¹` in closed form: the left Jacobian of `Log` at `Exp(ξ)`."""
    return _se3_jacobian(xi, "left", True, "se3_jl_inv")


def se3_compose_jacobians(a, b, side="right"):
    """The Jacobians of `a ∘ b` in `a` and `b`: right `(Ad(b⁻¹), I)`, left `(I, Ad(a))`."""
    pa, pb = _pose(a, "se3_compose_jacobians"), _pose(b, "se3_compose_jacobians")
    eye = _identity(pa[0][0] * pb[0][0], 6)
    if _side(side) == "right":
        return _matrix(_se3_adjoint(_se3_inverse(pb))), _matrix(eye)
    return _matrix(eye), _matrix(_se3_adjoint(pa))


def se3_act_jacobians(x, p, side="right"):
    """The Jacobians of `x · p` in `x` (`[..., 3, 6]`) and `p`: right `([R, -R [p]×], R)`,
    left `([I, -[x · p]×], R)`."""
    q, t = _pose(x, "se3_act_jacobians")
    p = _split(p, 3, "se3_act_jacobians")
    r = _rotation(q)
    if _side(side) == "right":
        translation, rotation = r, _neg(_mat_mul(r, _skew(p)))
    else:
        moved = _rotate(q, p)
        translation, rotation = _identity(q[0]), _neg(_skew([moved[i] + t[i] for i in range(3)]))
    return _matrix([translation[i] + rotation[i] for i in range(3)]), _matrix(r)


def se3_inverse_jacobian(x, side="right"):
    """The Jacobian of `x⁻¹` in `x`: right `-Ad(x)`, left `-Ad(x⁻¹)`."""
    p = _pose(x, "se3_inverse_jacobian")
    ad = _se3_adjoint(p if _side(side) == "right" else _se3_inverse(p))
    return _matrix([[-c for c in row] for row in ad])


# -- SO(2) and SE(2) ----------------------------------------------------------------------------


def _rot2_mul(a, b):
    return [a[0] * b[0] - a[1] * b[1], a[1] * b[0] + a[0] * b[1]]


def _rot2_conj(a):
    return [a[0], -a[1]]


def _angle(a):
    return np.arctan2(a[1], a[0])


def so2_exp(theta):
    """`Exp([θ]) = [cos θ, sin θ]` (`[..., 1]` to `[..., 2]`)."""
    (theta,) = _split(theta, 1, "so2_exp")
    return _stack([np.cos(theta), np.sin(theta)])


def so2_log(r):
    """`Log(r) = [atan2(sin, cos)]` in `(-π, π]`."""
    return _stack([_angle(_split(r, 2, "so2_log"))])


def so2_compose(a, b):
    """`a ∘ b`."""
    return _stack(_rot2_mul(_split(a, 2, "so2_compose"), _split(b, 2, "so2_compose")))


def so2_inverse(r):
    """`r⁻¹`."""
    return _stack(_rot2_conj(_split(r, 2, "so2_inverse")))


def so2_act(r, p):
    """`R p` for points `p` (`[..., 2]`)."""
    return _stack(_rot2_mul(_split(r, 2, "so2_act"), _split(p, 2, "so2_act")))


def so2_between(a, b):
    """`a⁻¹ ∘ b`."""
    return _stack(_rot2_mul(_rot2_conj(_split(a, 2, "so2_between")), _split(b, 2, "so2_between")))


def so2_interp(a, b, t):
    """`a ∘ Exp(t Log(a⁻¹ ∘ b))` along the shorter arc."""
    ra = _split(a, 2, "so2_interp")
    step = _angle(_rot2_mul(_rot2_conj(ra), _split(b, 2, "so2_interp"))) * t
    return _stack(_rot2_mul(ra, [np.cos(step), np.sin(step)]))


def _se2_exp(rho, theta):
    theta2 = theta * theta
    a = _SINC(theta2)
    b = _ONE_MINUS_COS(theta2) * theta
    return [np.cos(theta), np.sin(theta)], [a * rho[0] - b * rho[1], b * rho[0] + a * rho[1]]


def _se2_log(r, t):
    theta = _angle(r)
    theta2 = theta * theta
    h = 1.0 - theta2 * _INV_COT(theta2)
    half = theta * 0.5
    return [h * t[0] + half * t[1], h * t[1] - half * t[0]], theta


def _se2_compose(a, b):
    (ra, ta), (rb, tb) = a, b
    moved = _rot2_mul(ra, tb)
    return _rot2_mul(ra, rb), [ta[0] + moved[0], ta[1] + moved[1]]


def _se2_inverse(x):
    r, t = x
    ri = _rot2_conj(r)
    back = _rot2_mul(ri, t)
    return ri, [-back[0], -back[1]]


def _pose2(x, name):
    c = _split(x, 4, name)
    return c[:2], c[2:]


def _pose2_out(r, t):
    return _stack(list(r) + list(t))


def se2_exp(xi):
    """`Exp([ρx, ρy, θ]) = (Exp(θ), V(θ) ρ)` (`[..., 3]` to `[..., 4]`)."""
    c = _split(xi, 3, "se2_exp")
    return _pose2_out(*_se2_exp(c[:2], c[2]))


def se2_log(x):
    """`Log(x) = [V(θ)⁻¹ t, θ]` (`[..., 4]` to `[..., 3]`)."""
    rho, theta = _se2_log(*_pose2(x, "se2_log"))
    return _stack(rho + [theta])


def se2_compose(a, b):
    """`a ∘ b = (R_a R_b, t_a + R_a t_b)`."""
    return _pose2_out(*_se2_compose(_pose2(a, "se2_compose"), _pose2(b, "se2_compose")))


def se2_inverse(x):
    """`x⁻¹ = (Rᵀ, -Rᵀ t)`."""
    return _pose2_out(*_se2_inverse(_pose2(x, "se2_inverse")))


def se2_act(x, p):
    """`R p + t` for points `p` (`[..., 2]`)."""
    r, t = _pose2(x, "se2_act")
    moved = _rot2_mul(r, _split(p, 2, "se2_act"))
    return _stack([moved[0] + t[0], moved[1] + t[1]])


def se2_between(a, b):
    """`a⁻¹ ∘ b`."""
    return _pose2_out(*_se2_compose(_se2_inverse(_pose2(a, "se2_between")), _pose2(b, "se2_between")))


def se2_interp(a, b, t):
    """`a ∘ Exp(t Log(a⁻¹ ∘ b))`."""
    pa = _pose2(a, "se2_interp")
    rho, theta = _se2_log(*_se2_compose(_se2_inverse(pa), _pose2(b, "se2_interp")))
    return _pose2_out(*_se2_compose(pa, _se2_exp([c * t for c in rho], theta * t)))


def _se2_jacobian(xi, side, name):
    r0, r1, theta = _split(xi, 3, name)
    theta2 = theta * theta
    s = _SINC(theta2)
    a = _ONE_MINUS_COS(theta2)
    tb = _THETA_MINUS_SIN(theta2) * theta
    at = a * theta
    z, o = np.zeros_like(theta), np.ones_like(theta)
    if _side(side) == "right":
        rows = [[s, at, r0 * tb - r1 * a], [-at, s, r0 * a + r1 * tb], [z, z, o]]
    else:
        rows = [[s, -at, r0 * tb + r1 * a], [at, s, r1 * tb - r0 * a], [z, z, o]]
    return _matrix(rows)


def se2_jr(xi):
    """The right Jacobian of `Exp` at `[ρx, ρy, θ]` (`[..., 3, 3]`)."""
    return _se2_jacobian(xi, "right", "se2_jr")


def se2_jl(xi):
    """The left Jacobian of `Exp` at `[ρx, ρy, θ]`."""
    return _se2_jacobian(xi, "left", "se2_jl")


def _se2_adjoint(x):
    r, t = x
    z, o = np.zeros_like(r[0]), np.ones_like(r[0])
    return [[r[0], -r[1], t[1]], [r[1], r[0], -t[0]], [z, z, o]]


def se2_adjoint(x):
    """`Ad(x) = [[R, (ty, -tx)ᵀ], [0, 1]]` (`[..., 3, 3]`)."""
    return _matrix(_se2_adjoint(_pose2(x, "se2_adjoint")))


def se2_jr_inv(xi):
    """`Jr(ξ)⁻¹`: the right Jacobian of `Log` at `Exp(ξ)` (`|θ| < 2π`)."""
    return np.linalg.inv(_se2_jacobian(xi, "right", "se2_jr_inv"))


def se2_jl_inv(xi):
    """`Jl(ξ)⁻¹`: the left Jacobian of `Log` at `Exp(ξ)`."""
    return np.linalg.inv(_se2_jacobian(xi, "left", "se2_jl_inv"))


def se2_compose_jacobians(a, b, side="right"):
    """The Jacobians of `a ∘ b` in `a` and `b`: right `(Ad(b⁻¹), I)`, left `(I, Ad(a))`."""
    pa, pb = _pose2(a, "se2_compose_jacobians"), _pose2(b, "se2_compose_jacobians")
    eye = _identity(pa[0][0] * pb[0][0])
    if _side(side) == "right":
        return _matrix(_se2_adjoint(_se2_inverse(pb))), _matrix(eye)
    return _matrix(eye), _matrix(_se2_adjoint(pa))


def se2_act_jacobians(x, p, side="right"):
    """The Jacobians of `x · p` in `x` (`[..., 2, 3]`) and `p`: right `([R, R (-py, px)ᵀ], R)`,
    left `([I, (-y₂, y₁)ᵀ], R)` with `y = x · p`."""
    r, t = _pose2(x, "se2_act_jacobians")
    p = _split(p, 2, "se2_act_jacobians")
    rot = [[r[0], -r[1]], [r[1], r[0]]]
    if _side(side) == "right":
        turn = _rot2_mul(r, [-p[1], p[0]])
        jx = [[r[0], -r[1], turn[0]], [r[1], r[0], turn[1]]]
    else:
        moved = _rot2_mul(r, p)
        y = [moved[0] + t[0], moved[1] + t[1]]
        z, o = np.zeros_like(r[0]), np.ones_like(r[0])
        jx = [[o, z, -y[1]], [z, o, y[0]]]
    return _matrix(jx), _matrix(rot)


def se2_inverse_jacobian(x, side="right"):
    """The Jacobian of `x⁻¹` in `x`: right `-Ad(x)`, left `-Ad(x⁻¹)`."""
    p = _pose2(x, "se2_inverse_jacobian")
    ad = _se2_adjoint(p if _side(side) == "right" else _se2_inverse(p))
    return _matrix([[-c for c in row] for row in ad])
