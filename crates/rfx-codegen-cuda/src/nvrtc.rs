//! Finding NVRTC and compiling CUDA C to PTX.
//!
//! cudarc opens `libnvrtc` by name only (`libnvrtc.so`, `libnvrtc.so.12`, ...) and panics when
//! it is missing, so this module first makes the library findable and checks it is there:
//!
//! 1. `RFX_NVRTC_LIB`, when set, is the absolute path of `libnvrtc.so.12`; it is loaded with
//!    `RTLD_GLOBAL` so that cudarc's later `dlopen("libnvrtc.so.12")` matches the SONAME that
//!    is already loaded (the builtins library beside it is found through the wheel's
//!    `RUNPATH $ORIGIN`).
//! 2. Otherwise `python3` is asked once where the `nvidia-cuda-nvrtc-cu12` wheel lives
//!    (`<site-packages>/nvidia/cuda_nvrtc/lib/libnvrtc.so.12`) and that file is preloaded.
//! 3. Either way the system's library search (`LD_LIBRARY_PATH`, ld.so.cache) is the last
//!    resort, through cudarc's own probe.
//!
//! The outcome is computed once per process. When no library is found the error is
//! [`BackendError::Unavailable`] with the install command; nothing here panics.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rfx_lower::BackendError;

/// Environment variable naming the NVRTC library file.
pub(crate) const NVRTC_LIB_VAR: &str = "RFX_NVRTC_LIB";

const INSTALL_HINT: &str = "install it with `python3 -m pip install nvidia-cuda-nvrtc-cu12` (or the CUDA toolkit), \
or set RFX_NVRTC_LIB to the path of libnvrtc.so.12";

fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: "cuda",
        reason: reason.into(),
    }
}

/// Where NVRTC was found (for messages), or why it was not.
fn nvrtc_status() -> &'static Result<String, String> {
    static STATUS: OnceLock<Result<String, String>> = OnceLock::new();
    STATUS.get_or_init(locate_and_load)
}

/// `Ok` when NVRTC can be used; otherwise `Unavailable` saying how to install it.
pub(crate) fn ensure_nvrtc() -> Result<(), BackendError> {
    match nvrtc_status() {
        Ok(_) => Ok(()),
        Err(reason) => Err(unavailable(reason.clone())),
    }
}

fn locate_and_load() -> Result<String, String> {
    let preloaded = match std::env::var_os(NVRTC_LIB_VAR) {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            preload(&path)
                .map_err(|e| format!("{NVRTC_LIB_VAR}={} could not be loaded: {e}", path.display()))?;
            Some(path)
        }
        _ => match wheel_library() {
            // A wheel that will not load is not fatal: the system library may still be there.
            Some(path) => preload(&path).ok().map(|()| path),
            None => None,
        },
    };
    // SAFETY: `is_culib_present` only `dlopen`s candidate names and closes them again.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    match (present, preloaded) {
        (true, Some(path)) => Ok(path.display().to_string()),
        (true, None) => Ok("libnvrtc from the system library path".to_string()),
        (false, Some(path)) => Err(format!(
            "{} was loaded but is not a CUDA 12 NVRTC (cudarc looks for libnvrtc.so.12); {INSTALL_HINT}",
            path.display()
        )),
        (false, None) => Err(format!("NVRTC (libnvrtc.so.12) was not found; {INSTALL_HINT}")),
    }
}

#[cfg(unix)]
fn preload(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading NVRTC runs its initialisers, which have no preconditions; the library is
    // never unloaded (forgotten), so the symbols cudarc resolves later stay valid.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
    std::mem::forget(library);
    Ok(())
}

#[cfg(not(unix))]
fn preload(_path: &Path) -> Result<(), String> {
    Err("preloading by path is only implemented on Unix".to_string())
}

/// Asks `python3` (once) for a directory of the `nvidia.<package>` namespace of the CUDA
/// wheels, e.g. `nvidia.cuda_nvrtc`.
fn python_package_dir(package: &str) -> Option<PathBuf> {
    let script = format!("import nvidia.{package} as m; print(list(m.__path__)[0])");
    let output = std::process::Command::new("python3")
        .args(["-c", &script])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let dir = PathBuf::from(text.trim());
    dir.is_dir().then_some(dir)
}

/// `<site-packages>/nvidia/cuda_nvrtc/lib/libnvrtc.so.12` when the wheel is installed.
fn wheel_library() -> Option<PathBuf> {
    let path = python_package_dir("cuda_nvrtc")?
        .join("lib")
        .join("libnvrtc.so.12");
    path.is_file().then_some(path)
}

/// Rewrites every `selp.f32` of the PTX as `selp.b32` and every `selp.f64` as `selp.b64`.
///
/// A select moves bits, so the two are the same instruction (PTX lets `.b32`/`.b64` take
/// `.f32`/`.f64` registers and `0f`/`0d` literals). The rewrite works around a ptxas
/// miscompile (12.9 and 13.0, hence the CUDA 12.x/13.0 driver JIT, sm_80 and sm_90): a float
/// select of the constants ±0.0 and -1.0 becomes an integer select of 0 and -1 converted by
/// `I2F.F32.S32`, which turns -0.0 into +0.0. NVVM folds float ops into selects of constants
/// (e.g. `-(b ? 1.0f : 0.0f)` into `selp.f32 %f1, 0f80000000, 0fBF800000, %p1`, fuzz seed
/// 1002753), and it turns integer selects of bit patterns back into float ones, so the CUDA C
/// cannot avoid the pattern; the bitwise select is assembled as `SEL` of the bit patterns.
pub(crate) fn bitwise_selects(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        // An instruction may carry a guard predicate (`@%p1 selp.f32 ...`).
        let (guard, rest) = match body.split_once(char::is_whitespace) {
            Some((first, rest)) if first.starts_with('@') => (Some(first), rest.trim_start()),
            _ => (None, body),
        };
        let rewritten = ["f32", "f64"].iter().find_map(|ty| {
            let tail = rest.strip_prefix("selp.")?.strip_prefix(ty)?;
            tail.starts_with(char::is_whitespace).then(|| {
                let bits = if *ty == "f32" { "b32" } else { "b64" };
                format!("selp.{bits}{tail}")
            })
        });
        match rewritten {
            Some(text) => {
                out.push_str(indent);
                if let Some(guard) = guard {
                    out.push_str(guard);
                    out.push(' ');
                }
                out.push_str(&text);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Compiles CUDA C `source` to PTX for `arch` (`compute_80`, `sm_90`, ...).
///
/// Exact mode passes `--fmad=false --ftz=false --prec-div=true --prec-sqrt=true` (no
/// contraction of `a*b+c` into FMA, IEEE division and square root, subnormals kept), so exact
/// ops give the interpreter's bits; fast mode passes `--use_fast_math`.
///
/// The result is looked up in, and stored to, the on-disk cache of `ptx_cache.rs`.
pub(crate) fn compile_ptx(
    source: &str,
    name: &str,
    arch: &str,
    fast_math: bool,
) -> Result<String, BackendError> {
    compile_ptx_cached(source, name, arch, fast_math, crate::ptx_cache::shared())
}

/// Everything the PTX of a compile depends on besides NVRTC's own inputs: this file (its
/// flags and its rewrite of the output), the library loaded and its version.
fn cache_key(source: &str, name: &str, arch: &str, fast_math: bool) -> String {
    static FINGERPRINT: OnceLock<String> = OnceLock::new();
    let fingerprint = FINGERPRINT.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        include_str!("nvrtc.rs").hash(&mut hasher);
        let (mut major, mut minor) = (0, 0);
        // SAFETY: called only after `ensure_nvrtc` found the library, so the symbol resolves;
        // the two pointers are to live locals.
        let version = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        let library = nvrtc_status().as_deref().unwrap_or("none");
        format!(
            "rfx-codegen-cuda {} nvrtc.rs {:016x}\nnvrtc {major}.{minor} ({version:?}) {library}",
            env!("CARGO_PKG_VERSION"),
            hasher.finish()
        )
    });
    format!("{fingerprint}\narch {arch}\nfast_math {fast_math}\nname {name}\n--\n{source}")
}

pub(crate) fn compile_ptx_cached(
    source: &str,
    name: &str,
    arch: &str,
    fast_math: bool,
    cache: Option<&crate::ptx_cache::PtxCache>,
) -> Result<String, BackendError> {
    ensure_nvrtc()?;
    if arch.is_empty() || !arch.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(BackendError::Compile {
            backend: "cuda",
            message: format!("invalid GPU architecture `{arch}` (expected e.g. `sm_90` or `compute_80`)"),
        });
    }
    let key = cache.map(|_| cache_key(source, name, arch, fast_math));
    if let (Some(cache), Some(key)) = (cache, &key)
        && let Some(ptx) = cache.get(key)
    {
        return Ok(ptx);
    }
    let mut options = vec![format!("--gpu-architecture={arch}")];
    if fast_math {
        options.push("--use_fast_math".to_string());
    } else {
        options.extend(
            [
                "--fmad=false",
                "--ftz=false",
                "--prec-div=true",
                "--prec-sqrt=true",
            ]
            .map(String::from),
        );
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options,
        name: Some(format!("{name}.cu")),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
        Ok(ptx) => {
            let ptx = bitwise_selects(&ptx.to_src());
            if let (Some(cache), Some(key)) = (cache, &key) {
                cache.put(key, &ptx);
            }
            Ok(ptx)
        }
        Err(cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. }) => Err(BackendError::Compile {
            backend: "cuda",
            message: format!("NVRTC: {nvrtc:?}\n{}", log.to_string_lossy()),
        }),
        Err(other) => Err(BackendError::Compile {
            backend: "cuda",
            message: format!("NVRTC: {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{bitwise_selects, cache_key, compile_ptx_cached, ensure_nvrtc};
    use crate::ptx_cache::PtxCache;

    /// A compile stores its PTX; the next compile of the same source reads it back instead of
    /// running NVRTC (an entry whose PTX is replaced is what it returns), and a compile with
    /// other options is another entry.
    #[test]
    fn compiles_are_stored_and_read_back_from_the_disk_cache() {
        if let Err(e) = ensure_nvrtc() {
            assert_ne!(
                std::env::var("RFX_REQUIRE_NVRTC").as_deref(),
                Ok("1"),
                "RFX_REQUIRE_NVRTC=1 but {e}"
            );
            println!("skipped: {e}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("rfx-nvrtc-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = PtxCache::new(dir.clone(), 100);
        let source = "extern \"C\" __global__ void rfx_0_k(float* y) { y[threadIdx.x] = 2.0f; }";
        let first = compile_ptx_cached(source, "k", "compute_80", false, Some(&cache)).expect("compile");
        assert!(first.contains(".entry rfx_0_k"), "{first}");
        let key = cache_key(source, "k", "compute_80", false);
        assert_eq!(cache.get(&key).as_deref(), Some(first.as_str()));
        let again = compile_ptx_cached(source, "k", "compute_80", false, Some(&cache)).expect("compile");
        assert_eq!(again, first);
        cache.put(&key, "// from the cache\n");
        let cached = compile_ptx_cached(source, "k", "compute_80", false, Some(&cache)).expect("compile");
        assert_eq!(cached, "// from the cache\n");
        // Fast math and another architecture are other keys, compiled afresh.
        let fast = compile_ptx_cached(source, "k", "compute_80", true, Some(&cache)).expect("compile");
        assert!(fast.contains(".entry rfx_0_k"), "{fast}");
        let sm90 = compile_ptx_cached(source, "k", "sm_90", false, Some(&cache)).expect("compile");
        assert!(sm90.contains(".target sm_90"), "{sm90}");
        // Without a cache nothing is read.
        let uncached = compile_ptx_cached(source, "k", "compute_80", false, None).expect("compile");
        assert_eq!(uncached, first);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn float_selects_become_bitwise() {
        let ptx = "\tsetp.eq.s16 \t%p3, %rs1, 0;\n\
                   \tselp.f32 \t%f1, 0f80000000, 0fBF800000, %p3;\n\
                   \t@%p1 selp.f64 \t%fd2, %fd1, 0d8000000000000000, %p2;\n\
                   \tselp.s32 \t%r1, 1, 0, %p3;\n\
                   \tselp.f32x \t%f1, %f2, %f3, %p3;\n";
        assert_eq!(
            bitwise_selects(ptx),
            "\tsetp.eq.s16 \t%p3, %rs1, 0;\n\
             \tselp.b32 \t%f1, 0f80000000, 0fBF800000, %p3;\n\
             \t@%p1 selp.b64 \t%fd2, %fd1, 0d8000000000000000, %p2;\n\
             \tselp.s32 \t%r1, 1, 0, %p3;\n\
             \tselp.f32x \t%f1, %f2, %f3, %p3;\n"
        );
    }
}
