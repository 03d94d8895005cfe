//! wrenfold's robotics benchmark (<https://github.com/wrenfold/wrenfold-benchmarks>) in rfx.
//!
//! wrenfold times four kernels with their Jacobians — `QuatLocalCoords`, `ImuIntegration`,
//! `QuatInterpolation` and `RollingShutterCamera` — as generated code against hand-written
//! C++. This crate writes each twice: traced with rfx ([`kernels`], built from `rfx::lie`) and
//! as hand-written straight-line `f64` Rust ([`handwritten`]). The test `tests/agree.rs` checks
//! that both give the same values and Jacobians and that the Jacobians match central finite
//! differences; the binary (run by `cargo xtask wrenfold-bench`) times them, batched and one
//! call at a time (see `src/main.rs` and docs/performance.md).
//!
//! A batch stores every input as one contiguous row-major array `[n, ..]` (a shared input —
//! the interpolation's `alpha`, the camera — once), the layout `vmap` takes; every output
//! likewise. The hand-written side reads and writes the same arrays.

pub mod handwritten;
pub mod kernels;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use handwritten as hw;
use kernels::Spec;

/// The inputs of `n` examples of one kernel, as `vmap` takes them.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The number of examples.
    pub n: usize,
    /// One array per input: `n` examples, or one for a shared input.
    pub inputs: Vec<Vec<f64>>,
}

impl Batch {
    /// The inputs as slices.
    pub fn slices(&self) -> Vec<&[f64]> {
        self.inputs.iter().map(Vec::as_slice).collect()
    }
}

/// Output arrays for `n` examples of `spec`, zero-filled.
pub fn outputs(spec: &Spec, n: usize) -> Vec<Vec<f64>> {
    (0..spec.outputs.len())
        .map(|j| vec![0.0; n * spec.output_len(j)])
        .collect()
}

/// `n` examples drawn as wrenfold's benchmark draws them (uniform `u ∈ [-1, 1]`; quaternions
/// are normalised 4-vectors of `u`; scales and the fixed camera as in wrenfold-benchmarks).
pub fn generate(spec: &Spec, n: usize, seed: u64) -> Batch {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut inputs: Vec<Vec<f64>> = spec
        .inputs
        .iter()
        .enumerate()
        .map(|(i, _)| Vec::with_capacity(n * spec.input_len(i)))
        .collect();
    for _ in 0..n {
        let example = draw(spec.name, &mut rng);
        for (input, values) in inputs.iter_mut().zip(example) {
            input.extend(values);
        }
    }
    for (i, (name, _)) in spec.inputs.iter().enumerate() {
        if spec.shared.contains(name) {
            inputs[i].truncate(spec.input_len(i));
        }
    }
    Batch { n, inputs }
}

const ALPHA: f64 = 0.312;
const CAMERA: hw::Camera = [250.0, 250.0, 319.5, 219.5, 0.01, -0.001, 0.0008, 0.001, -0.0001];

fn uniform(rng: &mut StdRng) -> f64 {
    rng.random_range(-1.0..=1.0)
}

fn vec3(rng: &mut StdRng, scale: f64) -> Vec<f64> {
    (0..3).map(|_| scale * uniform(rng)).collect()
}

fn quat(rng: &mut StdRng) -> Vec<f64> {
    let q: [f64; 4] = std::array::from_fn(|_| uniform(rng));
    let n = q.iter().map(|c| c * c).sum::<f64>().sqrt();
    q.iter().map(|c| c / n).collect()
}

/// One example's inputs, in the kernel's input order.
fn draw(kernel: &str, rng: &mut StdRng) -> Vec<Vec<f64>> {
    match kernel {
        "QuatLocalCoords" => vec![quat(rng), quat(rng)],
        "QuatInterpolation" => vec![quat(rng), quat(rng), vec![ALPHA]],
        "ImuIntegration" => {
            let mut x = vec![quat(rng)];
            for scale in [50.0, 5.0, 0.02, 0.2, 1.0, 10.0] {
                x.push(vec3(rng, scale));
            }
            x.push(vec![(uniform(rng) + 1.0) / 2.0 * 0.1 + 0.01]);
            x
        }
        _ => {
            let r_wi = quat(rng);
            let t_wi = vec3(rng, 50.0);
            let r_ic = quat(rng);
            let (t_ic, omega, v) = (vec3(rng, 0.02), vec3(rng, 0.1), vec3(rng, 1.0));
            // The point 10 m in front of the camera (at the start of readout).
            let r = hw::rotation_matrix(hw::quat_mul(arr(&r_wi), arr(&r_ic)));
            let p_cam = [-1.0, 1.1, 10.0];
            let p_world: Vec<f64> = (0..3)
                .map(|i| (0..3).map(|k| r[i][k] * p_cam[k]).sum::<f64>() + t_wi[i])
                .collect();
            let row_time = (uniform(rng) + 1.0) / 2.0 * 0.033;
            vec![
                r_wi,
                t_wi,
                r_ic,
                t_ic,
                omega,
                v,
                p_world,
                vec![row_time],
                CAMERA.to_vec(),
            ]
        }
    }
}

fn arr<const N: usize>(s: &[f64]) -> [f64; N] {
    std::array::from_fn(|i| s[i])
}

/// Example `i` of an input of `N` elements per example.
#[inline(always)]
fn at<const N: usize>(s: &[f64], i: usize) -> [f64; N] {
    let s = &s[N * i..N * i + N];
    std::array::from_fn(|k| s[k])
}

#[inline(always)]
fn put(out: &mut [f64], i: usize, values: &[f64]) {
    out[values.len() * i..values.len() * (i + 1)].copy_from_slice(values);
}

/// The hand-written `QuatLocalCoords` on example `i` of `inputs`, written at example `o` of
/// `outputs`.
#[inline(always)]
pub fn hw_local_coords(inputs: &[&[f64]], i: usize, outputs: &mut [&mut [f64]], o: usize) {
    let (v, d0, d1) = hw::quat_local_coords(at(inputs[0], i), at(inputs[1], i));
    put(outputs[0], o, &v);
    put(outputs[1], o, d0.as_flattened());
    put(outputs[2], o, d1.as_flattened());
}

/// The hand-written `QuatInterpolation` (shared `alpha`), like [`hw_local_coords`].
#[inline(always)]
pub fn hw_interpolation(inputs: &[&[f64]], i: usize, outputs: &mut [&mut [f64]], o: usize) {
    let (q, d0, d1) = hw::quat_interpolate(at(inputs[0], i), at(inputs[1], i), inputs[2][0]);
    put(outputs[0], o, &q);
    put(outputs[1], o, d0.as_flattened());
    put(outputs[2], o, d1.as_flattened());
}

/// The hand-written `ImuIntegration`, like [`hw_local_coords`].
#[inline(always)]
pub fn hw_imu(inputs: &[&[f64]], i: usize, outputs: &mut [&mut [f64]], o: usize) {
    let out = hw::integrate_imu(
        at(inputs[0], i),
        at(inputs[1], i),
        at(inputs[2], i),
        at(inputs[3], i),
        at(inputs[4], i),
        at(inputs[5], i),
        at(inputs[6], i),
        inputs[7][i],
    );
    put(outputs[0], o, &out.i_r_k);
    put(outputs[1], o, &out.i_p_k);
    put(outputs[2], o, &out.i_v_k);
    put(outputs[3], o, out.k_d_j.as_flattened());
    put(outputs[4], o, out.k_d_measurements.as_flattened());
    put(outputs[5], o, out.k_d_bias.as_flattened());
}

/// The hand-written `RollingShutterCamera` (shared camera), like [`hw_local_coords`].
#[inline(always)]
pub fn hw_projection(inputs: &[&[f64]], i: usize, outputs: &mut [&mut [f64]], o: usize) {
    let out = hw::integrate_and_project(
        at(inputs[0], i),
        at(inputs[1], i),
        at(inputs[2], i),
        at(inputs[3], i),
        at(inputs[4], i),
        at(inputs[5], i),
        at(inputs[6], i),
        inputs[7][i],
        &at(inputs[8], 0),
    );
    put(outputs[0], o, &out.p_image);
    for (k, jac) in out.jacobians.iter().enumerate() {
        put(outputs[1 + k], o, jac.as_flattened());
    }
}

/// The hand-written kernel of `spec` over every example of `inputs`.
pub fn run_handwritten(spec: &Spec, inputs: &[&[f64]], n: usize, outputs: &mut [&mut [f64]]) {
    match spec.name {
        "QuatLocalCoords" => (0..n).for_each(|i| hw_local_coords(inputs, i, outputs, i)),
        "QuatInterpolation" => (0..n).for_each(|i| hw_interpolation(inputs, i, outputs, i)),
        "ImuIntegration" => (0..n).for_each(|i| hw_imu(inputs, i, outputs, i)),
        _ => (0..n).for_each(|i| hw_projection(inputs, i, outputs, i)),
    }
}

/// The input types of `spec` for a batch of `n` (`None`: one example, unbatched).
pub fn input_types(spec: &Spec, n: Option<usize>) -> Vec<rfx::TensorType> {
    spec.inputs
        .iter()
        .map(|(name, dims)| {
            let mut shape = Vec::with_capacity(dims.len() + 1);
            if let Some(n) = n.filter(|_| !spec.shared.contains(name)) {
                shape.push(n);
            }
            shape.extend_from_slice(dims);
            rfx::TensorType::new(rfx::DType::F64, shape)
        })
        .collect()
}

/// The kernel of `spec` compiled for `n` examples on `backend` and bound for calls: the
/// `vmap` of the traced kernel for `Some(n)`, the kernel itself for `None`.
pub fn bind(spec: &Spec, n: Option<usize>, backend: &str) -> Result<rfx::BoundKernel, String> {
    let kernel = spec
        .kernel()
        .map_err(|e| format!("{}: tracing: {e}", spec.name))?;
    let types = input_types(spec, n);
    let bound = match n {
        Some(_) => {
            let batched = rfx::vmap(rfx::KernelSource::new(kernel)).in_axes(&spec.in_axes());
            rfx::jit(batched).on_backend(backend).bind(&types)
        }
        None => rfx::jit_kernel(kernel).on_backend(backend).bind(&types),
    };
    bound.map_err(|e| format!("{}: compiling: {e}", spec.name))
}

/// Runs `bound` on `I` input and `O` output slices (no allocation).
#[inline(always)]
pub fn run_fixed<const I: usize, const O: usize>(
    bound: &mut rfx::BoundKernel,
    inputs: &[&[f64]],
    outputs: &mut [&mut [f64]],
) -> Result<(), String> {
    let arity = || format!("expected {I} inputs and {O} outputs");
    let inputs: [&[f64]; I] = inputs.try_into().map_err(|_| arity())?;
    let outputs: &mut [&mut [f64]; O] = outputs.try_into().map_err(|_| arity())?;
    bound
        .run_slices(inputs, outputs.each_mut().map(|s| &mut **s))
        .map_err(|e| e.to_string())
}

/// Runs `bound` (a kernel of `spec`) on `inputs` into `outputs`.
pub fn run_bound(
    spec: &Spec,
    bound: &mut rfx::BoundKernel,
    inputs: &[&[f64]],
    outputs: &mut [&mut [f64]],
) -> Result<(), String> {
    match (spec.inputs.len(), spec.outputs.len()) {
        (2, 3) => run_fixed::<2, 3>(bound, inputs, outputs),
        (3, 3) => run_fixed::<3, 3>(bound, inputs, outputs),
        (8, 6) => run_fixed::<8, 6>(bound, inputs, outputs),
        (9, 8) => run_fixed::<9, 8>(bound, inputs, outputs),
        (i, o) => Err(format!("{}: no call for {i} inputs and {o} outputs", spec.name)),
    }
}
