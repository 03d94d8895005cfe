//! Writes the CLIF and machine code of a broad set of kernels into a directory, one file per
//! kernel and mode: kernel files (`.rfx`) of the corpus directories given, benchmark-shaped
//! kernels at ten sizes (elementwise, transcendentals, reductions, rows, columns, scans), random
//! kernels and long transcendental chains, for the host target, fast math, `baseline` and
//! `avx2`. A refactoring of the emitter that changes no behaviour leaves every file the same:
//!
//! `cargo run -p rfx-codegen-cpu --example golden_clif -- DIR crates/rfx-opt/tests/corpus`,
//! before and after, then `diff -r`.

use std::path::Path;

use rfx_check::generator::{KernelGenConfig, random_kernel, transcendental_kernel};
use rfx_ir::DType;
use rfx_ir::hir::Kernel;
use rfx_ir::testgen::TestRng;
use rfx_lower::{CompileOptions, CpuTarget};

const SIZES: [usize; 10] = [1, 3, 7, 8, 33, 100, 512, 1000, 4096, 20000];

fn templates() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "add",
            "%x = input x : f32[N]\n%y = input y : f32[N]\n%out = add %x, %y : f32[N]\noutput out = %out",
        ),
        (
            "sin",
            "%x = input x : f32[N]\n%out = sin %x : f32[N]\noutput out = %out",
        ),
        (
            "sin64",
            "%x = input x : f64[N]\n%out = sin %x : f64[N]\noutput out = %out",
        ),
        (
            "sincos",
            "%x = input x : f32[N]\n%s = sin %x : f32[N]\n%c = cos %x : f32[N]\n%o = add %s, %c : f32[N]\noutput o = %o",
        ),
        (
            "sincos64",
            "%x = input x : f64[N]\n%s = sin %x : f64[N]\n%c = cos %x : f64[N]\noutput s = %s\noutput c = %c",
        ),
        (
            "exp_tanh",
            "%x = input x : f32[N]\n%e = exp %x : f32[N]\n%t = tanh %e : f32[N]\n%l = log %t : f32[N]\noutput l = %l",
        ),
        (
            "atan2",
            "%x = input x : f32[N]\n%y = input y : f32[N]\n%a = atan2 %x, %y : f32[N]\n%p = pow %a, %y : f32[N]\noutput p = %p",
        ),
        (
            "fused_chain",
            "%x = input x : f32[N]\n%y = input y : f32[N]\n%c = const 2.0 : f32[]\n%m = mul %x, %c : f32[N]\n%s = sin %m : f32[N]\n%out = add %s, %y : f32[N]\noutput out = %out",
        ),
        (
            "fma",
            "%x = input x : f32[N]\n%y = input y : f32[N]\n%z = input z : f32[N]\n%m = mul %x, %y : f32[N]\n%a = add %m, %z : f32[N]\n%b = sub %z, %m : f32[N]\noutput a = %a\noutput b = %b",
        ),
        (
            "sum",
            "%x = input x : f32[N]\n%out = sum %x axes [0] : f32[]\noutput out = %out",
        ),
        (
            "sum64",
            "%x = input x : f64[N]\n%out = sum %x axes [0] : f64[]\noutput out = %out",
        ),
        (
            "max",
            "%x = input x : f32[N]\n%out = max %x axes [0] : f32[]\noutput out = %out",
        ),
        (
            "sum_sin",
            "%x = input x : f32[N]\n%s = sin %x : f32[N]\n%out = sum %s axes [0] : f32[]\noutput out = %out",
        ),
        (
            "sum_exp64",
            "%x = input x : f64[N]\n%s = exp %x : f64[N]\n%out = sum %s axes [0] : f64[]\noutput out = %out",
        ),
        (
            "rows3",
            "%x = input x : f32[N,3]\n%q = mul %x, %x : f32[N,3]\n%s = sum %q axes [1] : f32[N]\n%r = sqrt %s : f32[N]\noutput r = %r",
        ),
        (
            "rows8",
            "%x = input x : f32[N,8]\n%e = exp %x : f32[N,8]\n%s = sum %e axes [1] : f32[N]\noutput s = %s",
        ),
        (
            "rows_sin",
            "%x = input x : f32[N,5]\n%e = sin %x : f32[N,5]\n%s = max %e axes [1] : f32[N]\noutput s = %s",
        ),
        (
            "cols",
            "%x = input x : f32[4,N]\n%e = cos %x : f32[4,N]\n%s = sum %e axes [0] : f32[N]\noutput s = %s",
        ),
        (
            "cumsum",
            "%x = input x : f32[N]\n%c = cumsum %x axis 0 : f32[N]\noutput c = %c",
        ),
        (
            "cumprod_rows",
            "%x = input x : f32[N,4]\n%c = cumprod %x axis 0 : f32[N,4]\noutput c = %c",
        ),
        (
            "cummax_rev",
            "%x = input x : f64[3,N]\n%c = cummax %x axis 1 reverse : f64[3,N]\noutput c = %c",
        ),
        (
            "transpose",
            "%x = input x : f32[N,3]\n%t = transpose %x perm [1,0] : f32[3,N]\n%s = sin %t : f32[3,N]\noutput s = %s",
        ),
        (
            "int_mix",
            "%x = input x : i32[N]\n%y = input y : f32[N]\n%c = cast %x : f32[N]\n%g = gt %c, %y : bool[N]\n%s = select %g, %c, %y : f32[N]\noutput s = %s",
        ),
    ]
}

fn kernel_text(name: &str, body: &str, n: usize) -> String {
    let mut text = format!("kernel {name} {{\n");
    for line in body.lines() {
        text += "  ";
        text += &line
            .replace("[N]", &format!("[{n}]"))
            .replace("[N,", &format!("[{n},"))
            .replace(",N]", &format!(",{n}]"));
        text += "\n";
    }
    text + "}\n"
}

fn dump(dir: &Path, name: &str, kernel: &Kernel, fast_math: bool) {
    dump_for(dir, name, kernel, fast_math, CpuTarget::Host);
}

fn dump_for(dir: &Path, name: &str, kernel: &Kernel, fast_math: bool, cpu_target: CpuTarget) {
    let Ok((mir, _)) = rfx_opt::optimize(kernel, &rfx_opt::OptConfig::default()) else {
        return;
    };
    let Ok((lir, _)) = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default()) else {
        return;
    };
    let options = CompileOptions {
        fast_math,
        cpu_target,
        ..CompileOptions::default()
    };
    let text = match rfx_codegen_cpu::dump_with(&lir, &options) {
        Ok(kernels) => kernels
            .into_iter()
            .map(|(k, clif, asm)| format!("== {k}\n{clif}\n-- asm\n{asm}\n"))
            .collect::<String>(),
        Err(e) => format!("error: {e}\n"),
    };
    let suffix = match (fast_math, cpu_target) {
        (false, CpuTarget::Host) => String::new(),
        (true, CpuTarget::Host) => ".fast".to_string(),
        (fast, t) => format!(".{t}{}", if fast { ".fast" } else { "" }),
    };
    std::fs::write(dir.join(format!("{name}{suffix}.clif")), text).expect("write");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: golden_clif DIR [CORPUS_DIR...]")?;
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    for corpus in std::env::args().skip(2) {
        let mut files: Vec<_> = std::fs::read_dir(&corpus)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .collect();
        files.sort();
        for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "rfx")) {
            let text = std::fs::read_to_string(path)?;
            if let Ok(kernel) = rfx_ir::hir::parse(&text) {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("k");
                dump(dir, &format!("corpus_{stem}"), &kernel, false);
                dump(dir, &format!("corpus_{stem}"), &kernel, true);
                dump_for(dir, &format!("corpus_{stem}"), &kernel, true, CpuTarget::Baseline);
            }
        }
    }
    for (name, body) in templates() {
        for n in SIZES {
            let text = kernel_text(name, body, n);
            let kernel = rfx_ir::hir::parse(&text).map_err(|e| format!("{e}\n{text}"))?;
            dump(dir, &format!("t_{name}_{n}"), &kernel, false);
            if n == 100 || n == 4096 {
                dump(dir, &format!("t_{name}_{n}"), &kernel, true);
                for t in [CpuTarget::Baseline, CpuTarget::Avx2] {
                    dump_for(dir, &format!("t_{name}_{n}"), &kernel, false, t);
                    dump_for(dir, &format!("t_{name}_{n}"), &kernel, true, t);
                }
            }
        }
    }
    let mut configs = vec![KernelGenConfig::default()];
    configs.push(KernelGenConfig {
        max_dim: 40,
        max_rank: 2,
        ..KernelGenConfig::default()
    });
    configs.push(KernelGenConfig {
        max_dim: 700,
        max_rank: 1,
        max_ops: 8,
        ..KernelGenConfig::default()
    });
    for (c, config) in configs.iter().enumerate() {
        for seed in 0..120u64 {
            let mut rng = TestRng::new(seed * 7 + c as u64);
            let kernel = random_kernel(&mut rng, config, "r");
            dump(dir, &format!("rand{c}_{seed}"), &kernel, seed % 4 == 0);
        }
    }
    for (i, (dtype, len)) in [
        (DType::F32, 5),
        (DType::F32, 600),
        (DType::F64, 600),
        (DType::F32, 3000),
        (DType::F64, 64),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = TestRng::new(i as u64);
        let kernel = transcendental_kernel(&mut rng, 12, dtype, len, "tr");
        dump(dir, &format!("trans_{i}"), &kernel, false);
    }
    Ok(())
}
