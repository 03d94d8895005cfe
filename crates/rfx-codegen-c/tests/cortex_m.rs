//! Every exportable conformance kernel and corpus kernel compiled for a Cortex-M4F
//! (`arm-none-eabi-gcc -std=c99 -O2 -mcpu=cortex-m4 -mthumb -mfloat-abi=hard
//! -mfpu=fpv4-sp-d16 -Wall -Wextra -Werror -ffp-contract=off -fno-math-errno`), many kernels per
//! translation unit: no warnings, and the objects' undefined symbols (`arm-none-eabi-nm -u`)
//! include no allocator and no libm function; objects of f32-only programs need no
//! double-precision soft-float helper (`__aeabi_d*`). Skipped, with a message, where
//! `arm-none-eabi-gcc` is not installed (Debian: `gcc-arm-none-eabi`), unless
//! `RFX_REQUIRE_ARM_GCC` is set (as CI sets it): then that is a failure.

mod common;

use std::fmt::Write as _;
use std::process::Command;

use common::{CORTEX_M4F_CFLAGS, corpus_kernels, lower_kernel};
use rfx_check::conformance::cases;
use rfx_codegen_c::c_source;
use rfx_ir::DType;
use rfx_ir::lir::LirProgram;

/// Symbols that would mean an allocator or libm is needed, separated by spaces: the allocator,
/// `errno`, and the libm function (`f64` and `f32`) of every op and of the helpers an
/// approximation might call.
const FORBIDDEN: &str = "malloc calloc realloc free __errno errno sqrt sqrtf exp expf exp2 exp2f expm1 expm1f \
     log logf log2 log2f log1p log1pf pow powf sin sinf cos cosf sincos sincosf tan tanf \
     asin asinf acos acosf atan atanf atan2 atan2f tanh tanhf erf erff floor floorf ceil \
     ceilf trunc truncf rint rintf nearbyint nearbyintf round roundf lrint lrintf fabs \
     fabsf fmod fmodf fmin fminf fmax fmaxf fma fmaf ldexp ldexpf scalbn scalbnf frexp \
     frexpf";
// `memset` and `memcpy` may appear: GCC emits them for loops that fill or copy arrays, and
// requires every freestanding environment to provide them (with `memmove` and `memcmp`).

fn f32_only(program: &LirProgram) -> bool {
    program.buffers().iter().all(|b| b.ty.dtype != DType::F64)
        && program
            .kernels()
            .iter()
            .all(|k| k.slots.iter().all(|&d| d != DType::F64))
}

#[test]
fn exported_kernels_compile_for_cortex_m4f_without_libm_or_allocator() {
    let found = Command::new("arm-none-eabi-gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("RFX_REQUIRE_ARM_GCC").is_none(),
            "arm-none-eabi-gcc not found and RFX_REQUIRE_ARM_GCC is set (Debian packages \
             gcc-arm-none-eabi and libnewlib-arm-none-eabi)"
        );
        eprintln!("skipped: arm-none-eabi-gcc not found (Debian package gcc-arm-none-eabi)");
        return;
    }
    let mut programs: Vec<(String, LirProgram)> = cases()
        .iter()
        .filter_map(|case| lower_kernel(&case.kernel).ok().map(|p| (case.name.clone(), p)))
        .collect();
    for (name, kernel) in corpus_kernels() {
        if let Ok(p) = lower_kernel(&kernel) {
            programs.push((name, p));
        }
    }
    // f32-only and other programs go to separate objects so the soft-double check is exact.
    let exportable: Vec<(bool, String, LirProgram)> = programs
        .into_iter()
        .filter(|(_, p)| c_source(p, "probe").is_ok())
        .map(|(name, p)| (f32_only(&p), name, p))
        .collect();
    assert!(exportable.len() > 1000, "only {} exportable", exportable.len());
    let dir = tempfile::tempdir().expect("temp dir");
    // One translation unit of up to 200 kernels per job; the jobs compile side by side.
    let mut jobs: Vec<(bool, usize, std::path::PathBuf)> = Vec::new();
    for single in [true, false] {
        let group: Vec<&(bool, String, LirProgram)> =
            exportable.iter().filter(|(s, _, _)| *s == single).collect();
        for (b, chunk) in group.chunks(200).enumerate() {
            // A folder per unit: each unit's kernels are `k0`, `k1`, ... with headers of
            // those names.
            let unit = dir.path().join(format!("unit_{single}_{b}"));
            std::fs::create_dir(&unit).expect("unit folder");
            let mut tu = String::new();
            for (k, (_, _, program)) in chunk.iter().enumerate() {
                let name = format!("k{k}");
                let export = c_source(program, &name).expect("export");
                std::fs::write(unit.join(format!("{name}.h")), export.header).expect("write");
                std::fs::write(unit.join(format!("{name}.c")), export.source).expect("write");
                let _ = writeln!(tu, "#include \"{name}.c\"");
            }
            let src = unit.join("tu.c");
            std::fs::write(&src, tu).expect("write");
            jobs.push((single, b, src));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some((single, b, src)) =
                    jobs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    check_object(*single, *b, src);
                }
            });
        }
    });
    let objects = jobs.len();
    eprintln!("{} programs in {objects} Cortex-M4F objects", exportable.len());
}

/// Compiles one translation unit for the Cortex-M4F and checks the symbols its object needs:
/// none of `FORBIDDEN`, and no soft-double helper in an f32-only object.
fn check_object(single: bool, b: usize, src: &std::path::Path) {
    let obj = src.with_extension("o");
    let out = Command::new("arm-none-eabi-gcc")
        .args(CORTEX_M4F_CFLAGS)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("run arm-none-eabi-gcc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let nm = Command::new("arm-none-eabi-nm")
        .arg("-u")
        .arg(&obj)
        .output()
        .expect("run nm");
    let symbols = String::from_utf8_lossy(&nm.stdout);
    for line in symbols.lines() {
        let symbol = line.split_whitespace().last().unwrap_or_default();
        assert!(
            !FORBIDDEN.split_whitespace().any(|f| f == symbol),
            "object {b} (f32 only: {single}) needs `{symbol}`:\n{symbols}"
        );
        if single {
            assert!(
                !symbol.starts_with("__aeabi_d"),
                "f32-only object {b} needs the soft-double helper `{symbol}`:\n{symbols}"
            );
        }
    }
}
