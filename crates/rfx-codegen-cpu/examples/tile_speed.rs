//! Time per call of the transcendental benchmark kernels (`sin x`, `sin(x*2)+y`, the 10-op
//! chain) and the clamped PID update on one thread, at n = 65536 and n = 4096, through the checked call: the minimum and
//! the median over many back-to-back calls, for comparing code-generation changes in one run
//! (this machine's load makes single figures unreliable; the minimum is the steadier one).
//!
//! `cargo run --release -p rfx-codegen-cpu --example tile_speed [-- --calls N] [--gcc LIB]`
//!
//! With `--gcc target/peers/build/libpeerc.so` (built by the peers script) it times the peers'
//! gcc kernels (`vec_K3`, `vec_K4`, `vec_K5`, `vec_K6`: `-O3 -march=native -ffast-math`,
//! glibc's vector math) on the same arrays in the same run, and prints rfx's time over gcc's.

mod compile;

use std::time::Instant;

use rfx_ir::{ArrayView, ArrayViewMut, Shape};
use rfx_lower::Scratch;

use compile::compile_one_thread;

/// The peers' C kernels' ABI: `out, a, b, c, scratch, n`.
type PeerKernel = unsafe extern "C" fn(*mut f32, *const f32, *const f32, *const f32, *mut f32, i64);

/// The gcc-compiled kernels of `KERNELS` (`vec_K3` ...) from the peers' library at `path`.
fn gcc_kernels(path: &str) -> Result<Vec<PeerKernel>, Box<dyn std::error::Error>> {
    use std::ffi::{CString, c_char, c_int, c_void};
    unsafe extern "C" {
        fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    let file = CString::new(path)?;
    // SAFETY: a NUL-terminated path; RTLD_NOW.
    let handle = unsafe { dlopen(file.as_ptr(), 2) };
    if handle.is_null() {
        return Err(format!("cannot load {path}").into());
    }
    KERNELS
        .iter()
        .map(|(_, _, _, name)| {
            let symbol = CString::new(*name)?;
            // SAFETY: a loaded library and a NUL-terminated name.
            let f = unsafe { dlsym(handle, symbol.as_ptr()) };
            if f.is_null() {
                return Err(format!("{path} has no {name}").into());
            }
            // SAFETY: the peers script defines each `vec_K*` with the `PeerKernel` signature.
            Ok(unsafe { std::mem::transmute::<*mut c_void, PeerKernel>(f) })
        })
        .collect()
}

fn summary(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[0], times[times.len() / 2])
}

/// Name, body (inputs `x`, `y`, `z`), arity, and the peers' gcc kernel computing the same.
const KERNELS: [(&str, &str, usize, &str); 4] = [
    ("sin", "%out = sin %x : f32[N]", 1, "vec_K3"),
    (
        "sin(x*2)+y",
        "%c = const 2.0 : f32[]\n %m = mul %x, %c : f32[N]\n %s = sin %m : f32[N]\n %out = add %s, %y : f32[N]",
        2,
        "vec_K4",
    ),
    (
        "chain10",
        "%a = const 1.5 : f32[]\n %b = const 0.5 : f32[]\n %p = mul %x, %a : f32[N]\n %q = add %p, %y : f32[N]\n %h = mul %q, %b : f32[N]\n %sx = sin %x : f32[N]\n %d = sub %h, %sx : f32[N]\n %cy = cos %y : f32[N]\n %e = mul %d, %cy : f32[N]\n %xx = mul %x, %x : f32[N]\n %nx = neg %xx : f32[N]\n %ex = exp %nx : f32[N]\n %out = add %e, %ex : f32[N]",
        2,
        "vec_K5",
    ),
    (
        "pid_clip",
        "%kp = const 1.2 : f32[]\n %ki = const 0.3 : f32[]\n %kd = const 0.05 : f32[]\n %lo = const -1.0 : f32[]\n %hi = const 1.0 : f32[]\n %a = mul %kp, %x : f32[N]\n %b = mul %ki, %y : f32[N]\n %c = mul %kd, %z : f32[N]\n %s = add %a, %b : f32[N]\n %t = add %s, %c : f32[N]\n %out = clamp %t, %lo, %hi : f32[N]",
        3,
        "vec_K6",
    ),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let calls: usize = match args.iter().position(|a| a == "--calls") {
        Some(p) => args.get(p + 1).ok_or("--calls needs a count")?.parse()?,
        None => 400,
    };
    let gcc = match args.iter().position(|a| a == "--gcc") {
        Some(p) => Some(gcc_kernels(args.get(p + 1).ok_or("--gcc needs a path")?)?),
        None => None,
    };
    for n in [65536usize, 4096] {
        for (k, (name, body, arity, _)) in KERNELS.into_iter().enumerate() {
            let mut text = String::from("kernel k {\n");
            for input in ["x", "y", "z"].iter().take(arity) {
                text += &format!(" %{input} = input {input} : f32[{n}]\n");
            }
            text += &format!(
                " {}\n output out = %out\n}}",
                body.replace("[N]", &format!("[{n}]"))
            );
            let (_, compiled) = compile_one_thread(&text)?;
            let shape = Shape::new([n]);
            let data: Vec<Vec<f32>> = test_data(arity, n);
            let mut out = vec![0.0f32; n];
            let inputs = views(&shape, &data)?;
            let mut scratch = Scratch::new();
            let mut times = Vec::with_capacity(calls);
            let mut peer_times = Vec::with_capacity(calls);
            let mut scratch_c = [0.0f32; 16];
            for _ in 0..calls + 20 {
                let mut outputs = [ArrayViewMut::new(&shape, &mut out)?];
                let start = Instant::now();
                compiled.run(&inputs, &mut outputs, &mut scratch)?;
                times.push(start.elapsed().as_nanos() as f64 / 1e3);
                if let Some(kernels) = &gcc {
                    let arg = |i: usize| data[i.min(arity - 1)].as_ptr();
                    let start = Instant::now();
                    // SAFETY: every array holds `n` elements; the kernel reads `a`, `b`, `c` and
                    // writes `out`.
                    unsafe {
                        kernels[k](
                            out.as_mut_ptr(),
                            arg(0),
                            arg(1),
                            arg(2),
                            scratch_c.as_mut_ptr(),
                            n as i64,
                        )
                    };
                    peer_times.push(start.elapsed().as_nanos() as f64 / 1e3);
                }
            }
            times.drain(..20);
            let (min, p50) = summary(times);
            print!("{name:>12} n={n:>6}: min {min:8.2} µs  p50 {p50:8.2} µs");
            if !peer_times.is_empty() {
                peer_times.drain(..20);
                let (gmin, gp50) = summary(peer_times);
                print!(
                    "   gcc min {gmin:8.2} p50 {gp50:8.2}   rfx/gcc min {:.2} p50 {:.2}",
                    min / gmin,
                    p50 / gp50
                );
            }
            println!();
        }
        f64_arm(n, calls)?;
    }
    // A single arm in a control loop, and a small batch (n < 64 keeps the inline code).
    f64_arm(1, calls * 100)?;
    f64_arm(16, calls * 50)?;
    Ok(())
}

/// `f64` kernels, timed alone (there are no gcc peers for them, so compare builds of rfx): the
/// two-link arm's forward kinematics (four `sin`/`cos`), a Gaussian cost term (`exp`) and a
/// log barrier (`log`), headings (`atan2`, `atan`), joint angles (`asin`, `acos`), saturations
/// (`tanh`, `sigmoid`), `tan + exp2 + log2`, and `pow` cost terms (also in `f32`).
fn f64_arm(n: usize, calls: usize) -> Result<(), Box<dyn std::error::Error>> {
    let arm = format!(
        "kernel k {{\n %q1 = input q1 : f64[{n}]\n %q2 = input q2 : f64[{n}]\n %l = const 0.7 : f64[]\n \
         %c1 = cos %q1 : f64[{n}]\n %s1 = sin %q1 : f64[{n}]\n %q12 = add %q1, %q2 : f64[{n}]\n \
         %c12 = cos %q12 : f64[{n}]\n %s12 = sin %q12 : f64[{n}]\n %b = mul %l, %c12 : f64[{n}]\n \
         %px = add %c1, %b : f64[{n}]\n %d = mul %l, %s12 : f64[{n}]\n %py = add %s1, %d : f64[{n}]\n \
         output px = %px\n output py = %py\n}}"
    );
    let gauss = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %xx = mul %x, %x : f64[{n}]\n \
         %m = neg %xx : f64[{n}]\n %e = exp %m : f64[{n}]\n %o = mul %e, %w : f64[{n}]\n output o = %o\n}}"
    );
    let barrier = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %xx = mul %x, %x : f64[{n}]\n \
         %one = const 1 : f64[]\n %a = add %xx, %one : f64[{n}]\n %l = log %a : f64[{n}]\n \
         %o = mul %l, %w : f64[{n}]\n output o = %o\n}}"
    );
    // Headings and a bearing as inverse kinematics computes them (`atan2`, `atan`).
    let heading = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %t = atan2 %x, %w : f64[{n}]\n \
         %u = atan %x : f64[{n}]\n %o = add %t, %u : f64[{n}]\n output o = %o\n}}"
    );
    // Joint angles from a sine and a cosine (`asin`, `acos`).
    let joints = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %k = const 0.19 : f64[]\n \
         %xs = mul %x, %k : f64[{n}]\n %ws = mul %w, %k : f64[{n}]\n %a = asin %xs : f64[{n}]\n \
         %b = acos %ws : f64[{n}]\n %o = sub %a, %b : f64[{n}]\n output o = %o\n}}"
    );
    // Saturations (`tanh`, `sigmoid`).
    let saturate = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %h = mul %x, %w : f64[{n}]\n \
         %t = tanh %h : f64[{n}]\n %s = sigmoid %x : f64[{n}]\n %o = add %t, %s : f64[{n}]\n output o = %o\n}}"
    );
    // `tan`, `exp2`, `log2`.
    let bases = format!(
        "kernel k {{\n %x = input x : f64[{n}]\n %w = input w : f64[{n}]\n %k = const 0.3 : f64[]\n \
         %a = mul %x, %k : f64[{n}]\n %t = tan %a : f64[{n}]\n %e = exp2 %w : f64[{n}]\n \
         %xx = mul %x, %x : f64[{n}]\n %l = log2 %xx : f64[{n}]\n %s = add %t, %e : f64[{n}]\n \
         %o = add %s, %l : f64[{n}]\n output o = %o\n}}"
    );
    // Cost terms with `pow`: a robust penalty |x - w|^1.5 (an invariant exponent), and a
    // discount factor 0.9^x (an invariant base), in both widths.
    let power = |dt: &str| {
        format!(
            "kernel k {{\n %x = input x : {dt}[{n}]\n %w = input w : {dt}[{n}]\n %p = const 1.5 : {dt}[]\n \
             %d = sub %x, %w : {dt}[{n}]\n %a = abs %d : {dt}[{n}]\n %e = pow %a, %p : {dt}[{n}]\n \
             %g = const 0.9 : {dt}[]\n %f = pow %g, %x : {dt}[{n}]\n %o = add %e, %f : {dt}[{n}]\n output o = %o\n}}"
        )
    };
    for (name, text) in [
        ("arm2_f64", arm),
        ("gauss_f64", gauss),
        ("barrier_f64", barrier),
        ("heading_f64", heading),
        ("joints_f64", joints),
        ("saturate_f64", saturate),
        ("power_f64", power("f64")),
        ("bases_f64", bases),
    ] {
        time_kernel::<f64>(name, &text, n, calls)?;
    }
    time_kernel::<f32>("power_f32", &power("f32"), n, calls)
}

/// Compiles `text` (two inputs of `n` elements of `T`) for one thread and prints the minimum
/// and median time of `calls` calls.
fn time_kernel<T: rfx_ir::Element + Copy + Default + From<f32>>(
    name: &str,
    text: &str,
    n: usize,
    calls: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let (lir, compiled) = compile_one_thread(text)?;
    let shape = Shape::new([n]);
    let data: Vec<Vec<T>> = test_data(2, n);
    let n_out = lir.outputs().count();
    let mut outs = vec![vec![T::default(); n]; n_out];
    let inputs = views(&shape, &data)?;
    let mut scratch = Scratch::new();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls + 20 {
        let mut outputs: Vec<ArrayViewMut<'_>> = outs
            .iter_mut()
            .map(|o| ArrayViewMut::new(&shape, o))
            .collect::<Result<_, _>>()?;
        let start = Instant::now();
        compiled.run(&inputs, &mut outputs, &mut scratch)?;
        times.push(start.elapsed().as_nanos() as f64 / 1e3);
    }
    times.drain(..20);
    let (min, p50) = summary(times);
    println!(
        "{name:>12} n={n:>6}: min {min:8.2} µs  p50 {p50:8.2} µs   ({:.2} ns per element)",
        min * 1e3 / n as f64
    );
    Ok(())
}

/// `arity` input arrays of `n` values in [-5, 5), different per input.
fn test_data<T: From<f32>>(arity: usize, n: usize) -> Vec<Vec<T>> {
    (0..arity)
        .map(|a| {
            (0..n)
                .map(|i| T::from(((i * 7 + a * 13) % 1000) as f32 * 0.01 - 5.0))
                .collect()
        })
        .collect()
}

/// One view of `shape` over each of `data`.
fn views<'a, T: rfx_ir::Element>(
    shape: &'a Shape,
    data: &'a [Vec<T>],
) -> Result<Vec<ArrayView<'a>>, rfx_ir::ArrayLengthError> {
    data.iter().map(|d| ArrayView::new(shape, d)).collect()
}
