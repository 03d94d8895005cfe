//! What a kernel is compiled with: the backend and every stage's options.

use rfx_lower::{CompileOptions, CpuTarget, LowerConfig};
use rfx_opt::OptConfig;

/// The backend and the options of every compiler stage. Part of every cache key: changing any
/// field compiles anew, and the cache's miss explanation names the field group that changed.
#[derive(Clone, Debug, PartialEq)]
pub struct CompileConfig {
    /// The backend's registry name: `"cpu"` (default), `"interp"`, `"cuda"`, `"metal"`, `"c"`.
    pub backend: String,
    /// Optimiser settings.
    pub opt: OptConfig,
    /// Lowering settings (vector width, threads, memory plan).
    pub lower: LowerConfig,
    /// Backend options.
    pub compile: CompileOptions,
}

impl Default for CompileConfig {
    fn default() -> CompileConfig {
        CompileConfig {
            backend: "cpu".to_string(),
            opt: OptConfig::default(),
            lower: LowerConfig::default(),
            compile: CompileOptions::default(),
        }
    }
}

impl CompileConfig {
    /// The default configuration on backend `name`.
    pub fn with_backend(name: impl Into<String>) -> CompileConfig {
        CompileConfig {
            backend: name.into(),
            ..CompileConfig::default()
        }
    }

    /// The same configuration with fast math in every stage: the optimiser's fast-math rules
    /// (`OptConfig::fast_math`) and the backend's (`CompileOptions::fast_math`: FMA contraction
    /// of `a * b ± c` on the CPU and CUDA, CUDA's hardware approximations). Results may then
    /// differ from the exact-IEEE ones within the documented fast-math bounds.
    pub fn fast_math(mut self) -> CompileConfig {
        self.opt.fast_math = true;
        self.compile.fast_math = true;
        self
    }

    /// The same configuration compiling for `target` on the `"cpu"` backend
    /// (`CompileOptions::cpu_target`; other backends ignore it): `CpuTarget::Baseline` or
    /// `CpuTarget::Avx2` make the generated code independent of the machine it is compiled on.
    pub fn cpu_target(mut self, target: CpuTarget) -> CompileConfig {
        self.compile.cpu_target = target;
        self
    }

    /// The options as a deterministic text key, one line per stage, the backend excluded (what
    /// [`CacheKey::options`](crate::CacheKey::options) holds). Formatting it costs more
    /// than a cached call's lookup, so a caller that keeps one configuration computes it once.
    pub fn options_key(&self) -> [String; 3] {
        [
            format!("{:?}", self.opt),
            format!("{:?}", self.lower),
            format!("{:?}", self.compile),
        ]
    }
}
