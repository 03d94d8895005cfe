//! The CPU a program is compiled for: a [`CpuTarget`] made concrete as a Cranelift ISA and the
//! features the emitter may use. The host is probed here, once per process, and nowhere else:
//! the emitter reads [`Features`] and never asks the CPU.

use std::sync::OnceLock;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use rfx_lower::{BackendError, CpuTarget};

/// What generated code may use on a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Features {
    /// Fused multiply-add: fast math contracts float `a * b ± c` into one `fma`.
    pub(crate) fma: bool,
    /// The ahead-of-time AVX2 routines of [`crate::aot`] (elementwise loops call them on tiles).
    pub(crate) routines: bool,
}

/// What this machine can run, as far as the targets care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostCpu {
    /// The architecture is x86-64.
    pub(crate) x86_64: bool,
    /// Fused multiply-add (x86-64's FMA3; every AArch64 CPU).
    pub(crate) fma: bool,
    /// AVX2 (x86-64).
    pub(crate) avx2: bool,
}

impl HostCpu {
    /// This machine (`std` caches the CPUID answers).
    pub(crate) fn probe() -> HostCpu {
        #[cfg(target_arch = "x86_64")]
        {
            HostCpu {
                x86_64: true,
                fma: std::is_x86_feature_detected!("fma"),
                avx2: std::is_x86_feature_detected!("avx2"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            HostCpu {
                x86_64: false,
                fma: cfg!(target_arch = "aarch64"),
                avx2: false,
            }
        }
    }
}

/// The features `target` gives on a machine like `host`, or why `host` cannot run its code.
pub(crate) fn features(target: CpuTarget, host: HostCpu) -> Result<Features, String> {
    match target {
        CpuTarget::Host => Ok(Features {
            fma: host.fma,
            // The routines are AVX2 code that also uses FMA (see `aot::available`).
            routines: host.x86_64 && host.avx2 && host.fma,
        }),
        CpuTarget::Baseline => Ok(Features {
            fma: false,
            routines: false,
        }),
        CpuTarget::Avx2 if !host.x86_64 => Err(
            "the `avx2` target is x86-64 code; this machine is not x86-64 (use `host` or `baseline`)".into(),
        ),
        CpuTarget::Avx2 if !(host.avx2 && host.fma) => Err(format!(
            "the `avx2` target needs a CPU with AVX2 and FMA; this one has{} (use `host` or `baseline`)",
            match (host.avx2, host.fma) {
                (false, false) => " neither",
                (true, false) => " AVX2 but no FMA",
                _ => " FMA but no AVX2",
            }
        )),
        CpuTarget::Avx2 => Ok(Features {
            fma: true,
            routines: true,
        }),
    }
}

/// A target ready to compile for: Cranelift's ISA and the emitter's features.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) isa: OwnedTargetIsa,
    /// The same ISA with Cranelift's mid-end on, built on first use.
    pub(crate) mid_end: MidEnd,
    pub(crate) features: Features,
}

/// The target `target` on this machine, built once per process and target: probing the CPU and
/// building the ISA costs a sizeable part of a small kernel's compile time. A failure is kept
/// as the error's text (`BackendError` is not `Clone`) and reported as `Unavailable` on every
/// compile.
pub(crate) fn target(target: CpuTarget) -> Result<Target, BackendError> {
    static TARGETS: [OnceLock<Result<Target, String>>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match target {
        CpuTarget::Host => &TARGETS[0],
        CpuTarget::Baseline => &TARGETS[1],
        CpuTarget::Avx2 => &TARGETS[2],
    };
    slot.get_or_init(|| {
        let features = features(target, HostCpu::probe())?;
        // The routines' own check, kept as a second guard: linking them on a CPU that cannot
        // run them would fault on the first call.
        if features.routines && !crate::aot::available() {
            return Err(format!(
                "the `{target}` target's AVX2 routines cannot run on this CPU"
            ));
        }
        Ok(Target {
            isa: build_isa(target, "none")?,
            mid_end: MidEnd { target },
            features,
        })
    })
    .clone()
    .map_err(|reason| BackendError::Unavailable {
        backend: "cpu",
        reason,
    })
}

/// A target's ISA with Cranelift's mid-end on (`opt_level = speed`: e-graph GVN, LICM,
/// folding, redundant-load elimination), run on a large kernel's function and on a program's
/// one function (`codegen::build_program`) before it is compiled with [`Target::isa`] (see
/// `codegen::wants_mid_end`). Built once per process and target, on first use: a process that
/// compiles only small kernels, each its own function, never builds it.
#[derive(Clone, Copy)]
pub(crate) struct MidEnd {
    target: CpuTarget,
}

impl MidEnd {
    /// The ISA (the same flags as [`Target::isa`] but `opt_level`).
    pub(crate) fn isa(self) -> Result<OwnedTargetIsa, BackendError> {
        static ISAS: [OnceLock<Result<OwnedTargetIsa, String>>; 3] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let slot = match self.target {
            CpuTarget::Host => &ISAS[0],
            CpuTarget::Baseline => &ISAS[1],
            CpuTarget::Avx2 => &ISAS[2],
        };
        slot.get_or_init(|| build_isa(self.target, "speed"))
            .clone()
            .map_err(|reason| BackendError::Unavailable {
                backend: "cpu",
                reason,
            })
    }
}

/// Cranelift's ISA for `target` with rfx's flags, at Cranelift's `opt_level` `level`.
fn build_isa(target: CpuTarget, level: &str) -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, k: &str, v: &str| flags.set(k, v).map_err(|e| e.to_string());
    // Functions are compiled with Cranelift's mid-end (e-graph GVN, LICM, folding) off:
    // rfx-opt has already simplified and de-duplicated the kernel, and the emitter shares
    // address arithmetic within each block (`Caches::memo`). On small kernels the code
    // executes about the same instructions with it on, and compiling takes fewer. Instruction
    // selection still folds addressing modes and immediates. Large kernels, and the one
    // function of a program of small kernels (`codegen::build_program`), run the mid-end first
    // with the `speed` ISA (`codegen::wants_mid_end`).
    set(&mut flags, "opt_level", level)?;
    set(
        &mut flags,
        "enable_verifier",
        if cfg!(debug_assertions) { "true" } else { "false" },
    )?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    // Every kernel starts on a cache line, so where its loops fall does not depend on the
    // size of the kernels compiled before it.
    set(&mut flags, "log2_min_function_alignment", "6")?;
    set(&mut flags, "is_pic", "false")?;
    // A frame larger than a page touches each page in turn as it grows (inline probes, no
    // call): a frame can never step over a thread's guard page. Frames are bounded anyway
    // (`codegen::MAX_FRAME`); functions with frames under 4 KiB, every small kernel's, get
    // no probe and no other change.
    set(&mut flags, "enable_probestack", "true")?;
    set(&mut flags, "probestack_strategy", "inline")?;
    let unsupported = |e: &str| format!("Cranelift does not support this host: {e}");
    let isa_builder = match target {
        CpuTarget::Host => cranelift_native::builder().map_err(unsupported)?,
        CpuTarget::Baseline => cranelift_native::builder_with_options(false).map_err(unsupported)?,
        CpuTarget::Avx2 => {
            let mut builder = cranelift_native::builder_with_options(false).map_err(unsupported)?;
            // Cranelift's name for x86-64-v3's feature set.
            builder.enable("haswell").map_err(|e| e.to_string())?;
            builder
        }
    };
    isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86_FULL: HostCpu = HostCpu {
        x86_64: true,
        fma: true,
        avx2: true,
    };

    #[test]
    fn host_follows_the_cpu() {
        let full = features(CpuTarget::Host, X86_FULL).expect("host");
        assert_eq!(
            full,
            Features {
                fma: true,
                routines: true
            }
        );
        let no_avx2 = HostCpu {
            avx2: false,
            ..X86_FULL
        };
        assert_eq!(
            features(CpuTarget::Host, no_avx2),
            Ok(Features {
                fma: true,
                routines: false
            })
        );
        let arm = HostCpu {
            x86_64: false,
            fma: true,
            avx2: false,
        };
        assert_eq!(
            features(CpuTarget::Host, arm),
            Ok(Features {
                fma: true,
                routines: false
            })
        );
    }

    #[test]
    fn baseline_uses_nothing_optional() {
        assert_eq!(
            features(CpuTarget::Baseline, X86_FULL),
            Ok(Features {
                fma: false,
                routines: false
            })
        );
    }

    #[test]
    fn avx2_needs_avx2_and_fma_on_x86_64() {
        assert_eq!(
            features(CpuTarget::Avx2, X86_FULL),
            Ok(Features {
                fma: true,
                routines: true
            })
        );
        let old = HostCpu {
            avx2: false,
            fma: false,
            ..X86_FULL
        };
        let err = features(CpuTarget::Avx2, old).expect_err("no avx2");
        assert!(err.contains("AVX2 and FMA") && err.contains("neither"), "{err}");
        let no_fma = HostCpu {
            fma: false,
            ..X86_FULL
        };
        let err = features(CpuTarget::Avx2, no_fma).expect_err("no fma");
        assert!(err.contains("no FMA"), "{err}");
        let arm = HostCpu {
            x86_64: false,
            fma: true,
            avx2: false,
        };
        let err = features(CpuTarget::Avx2, arm).expect_err("not x86");
        assert!(err.contains("not x86-64"), "{err}");
    }

    #[test]
    fn every_target_this_machine_can_run_builds_an_isa() {
        let host = HostCpu::probe();
        for t in CpuTarget::ALL {
            match (features(t, host), target(t)) {
                (Ok(f), Ok(built)) => assert_eq!(built.features, f, "{t}"),
                (Err(reason), Err(BackendError::Unavailable { backend, reason: got })) => {
                    assert_eq!((backend, got), ("cpu", reason), "{t}");
                }
                (want, got) => panic!("{t}: features {want:?}, target {:?}", got.map(|t| t.features)),
            }
        }
    }
}
