// Error-free transformations on f32 (no FMA: lavapipe splits `fma`), every intermediate
// through `rfx_exact` so that the compiler can neither fold `s - (s - b)` nor contract
// Veltkamp's split into an FMA. `two_sum(a, b)` = (a + b, its rounding error), Knuth's;
// `two_prod(a, b)` = (a * b, its rounding error), Dekker's, for |a|, |b| < 2^115.
fn rfx_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = rfx_exact(a + b);
    let bb = rfx_exact(s - a);
    return vec2<f32>(s, rfx_exact(a - rfx_exact(s - bb)) + rfx_exact(b - bb));
}

fn rfx_split(a: f32) -> vec2<f32> {
    let c = rfx_exact(a * 4097.0f);
    let hi = rfx_exact(c - rfx_exact(c - a));
    return vec2<f32>(hi, rfx_exact(a - hi));
}

fn rfx_two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = rfx_exact(a * b);
    let x = rfx_split(a);
    let y = rfx_split(b);
    let e = rfx_exact(rfx_exact(rfx_exact(x.x * y.x) - p) + rfx_exact(x.x * y.y));
    return vec2<f32>(p, rfx_exact(e + rfx_exact(x.y * y.x)) + rfx_exact(x.y * y.y));
}
