//! The WGSL helper functions generated code calls where WGSL's operators differ from rfx's
//! semantics, and rfx's own transcendentals. Each helper is a `.wgsl` file under `src/wgsl/`
//! (named after the function it defines), included at compile time; [`Helper`]'s table names
//! each once with the helpers it calls, transitively, as naga keeps its polyfills. A module
//! emits the helpers it uses once each, in the table's order.

use std::sync::OnceLock;

use rfx_lower::coefficients;

/// Generates [`Helper`] from the table: `Variant => "file and function name", [helpers it
/// calls, transitively];`.
macro_rules! helpers {
    ($($variant:ident => $name:literal, [$($dep:ident),*];)*) => {
        /// A helper function the generated code may call; the order is the emission order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub(crate) enum Helper {
            $($variant,)*
        }

        impl Helper {
            /// Every helper, in the table's order.
            pub(crate) const ALL: &'static [Helper] = &[$(Helper::$variant),*];

            /// The WGSL function the generated code calls.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Helper::$variant => $name,)*
                }
            }

            /// The text of `src/wgsl/<name>.wgsl`, coefficients still as `$NAME[i]`.
            fn template(self) -> &'static str {
                match self {
                    $(Helper::$variant => include_str!(concat!("wgsl/", $name, ".wgsl")),)*
                }
            }

            /// Every helper it calls, transitively.
            pub(crate) fn deps(self) -> &'static [Helper] {
                match self {
                    $(Helper::$variant => &[$(Helper::$dep),*],)*
                }
            }
        }
    };
}

impl Helper {
    /// Its WGSL source: the file with each `$NAME[i]` (`$-NAME[i]`: negated) replaced by
    /// coefficient `i` of the table `NAME` of [`rfx_lower::coefficients`] as a WGSL `f32`
    /// literal, so that an approximation's coefficients are written once for every backend.
    pub(crate) fn source(self) -> &'static str {
        static FILLED: OnceLock<Vec<String>> = OnceLock::new();
        let filled = FILLED.get_or_init(|| Helper::ALL.iter().map(|h| fill(h.template())).collect());
        filled.get(self as usize).map_or("", String::as_str)
    }
}

/// `template` with its coefficient references replaced. A reference to no table (a typo in a
/// `.wgsl` file) is left as it is, and naga rejects the `$`.
fn fill(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let (negate, tail) = tail.strip_prefix('-').map_or((false, tail), |t| (true, t));
        match coefficient(tail) {
            Some((value, len)) => {
                let value = if negate { -value } else { value };
                out.push_str(&format!("{value:e}f"));
                rest = &tail[len..];
            }
            None => {
                out.push('$');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The coefficient `NAME[i]` that `text` starts with, and the length of that reference.
fn coefficient(text: &str) -> Option<(f64, usize)> {
    let open = text.find('[')?;
    let close = open + text[open..].find(']')?;
    let (_, table) = coefficients::TABLES
        .iter()
        .find(|(name, _)| *name == &text[..open])?;
    let index: usize = text[open + 1..close].parse().ok()?;
    Some((*table.get(index)?, close + 1))
}

// `rfx_fmod_f32` is C's fmod, exact and loop-free (llvmpipe budgets loop iterations per
// invocation): with `|x| = mx 2^(ex-150)` and `|y| = my 2^(ey-150)`, the result is
// `((mx 2^(ex-ey)) mod my) 2^(ey-150)`, computed by integer remainders 8 bits at a time
// (`r < my <= 2^24`, so `r << 8` fits a u32), then rebuilt exactly (fmod's result is always
// representable). `rfx_exact.wgsl` also defines `rfx_exact2`; `rfx_two_prod.wgsl` also
// `rfx_two_sum` and `rfx_split`.
helpers! {
    Exact => "rfx_exact", [];
    IsNan => "rfx_isnan", [];
    MinF32 => "rfx_min_f32", [IsNan];
    MaxF32 => "rfx_max_f32", [IsNan];
    SignF32 => "rfx_sign_f32", [];
    FmodF32 => "rfx_fmod_f32", [];
    PowF32 => "rfx_pow_f32", [IsNan, Log2Dd, DoubleF32, Scale2, Exp2Poly, Exact];
    SigmoidF32 => "rfx_sigmoid_f32", [Scale2, ExpF32, Exact];
    TanhF32 => "rfx_tanh_f32", [];
    Atan2F32 => "rfx_atan2_f32", [IsNan, AtanF32, Exact];
    AtanF32 => "rfx_atan_f32", [Exact];
    AsinPoly => "rfx_asin_poly", [];
    AsinF32 => "rfx_asin_f32", [AsinPoly, Exact];
    AcosF32 => "rfx_acos_f32", [AsinPoly, Exact];
    Scale2 => "rfx_scale2", [];
    ExpF32 => "rfx_exp_f32", [Scale2, Exact];
    Exp2F32 => "rfx_exp2_f32", [Scale2, Exp2Poly, Exact];
    Exp2Poly => "rfx_exp2_poly", [];
    DoubleF32 => "rfx_two_prod", [Exact];
    Log2Dd => "rfx_log2_dd", [DoubleF32, Exact];
    Trig => "rfx_trig", [Exact];
    SinF32 => "rfx_sin_f32", [Trig, Exact];
    CosF32 => "rfx_cos_f32", [Trig, Exact];
    TanF32 => "rfx_tan_f32", [Trig, Exact];
    LogParts => "rfx_log_parts", [];
    LogF32 => "rfx_log_f32", [LogParts];
    Log2F32 => "rfx_log2_f32", [LogParts];
    ErfF32 => "rfx_erf_f32", [IsNan, Scale2, ExpF32, Exact];
    F32ToI32 => "rfx_f32_to_i32", [IsNan];
    DivI32 => "rfx_div_i32", [];
    FmodI32 => "rfx_fmod_i32", [];
}

#[cfg(test)]
mod tests {
    use super::Helper;

    /// Each file defines its function, and the table lists every helper a helper calls, with
    /// what those call in turn (the list is closed under its own entries).
    /// The coefficients filled in from the shared table give the text the file held before it
    /// had references, and no reference is left unfilled.
    #[test]
    fn coefficients_are_filled_in_from_the_shared_table() {
        let tanh = Helper::TanhF32.source();
        let expected = "let p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
            + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z;";
        assert!(tanh.contains(expected), "{tanh}");
        let asin = Helper::AsinPoly.source();
        let expected = "return ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z
        + 7.4953002686e-2f) * z + 1.6666752422e-1f) * z * t + t;";
        assert!(asin.contains(expected), "{asin}");
        let atan = Helper::AtanF32.source();
        let expected = "let p = (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z
        - 3.33329491539e-1f) * z * t + t;";
        assert!(atan.contains(expected), "{atan}");
        for &helper in Helper::ALL {
            assert!(!helper.source().contains('$'), "{helper:?}");
        }
        assert_eq!(
            super::fill("a $TANH_F32[9] $NONE[0] $-TANH_F32[0]"),
            "a $TANH_F32[9] $NONE[0] 3.33332819422e-1f"
        );
    }

    #[test]
    fn every_helper_defines_its_function_and_lists_what_it_calls() {
        for &helper in Helper::ALL {
            let source = helper.source();
            assert!(source.contains(&format!("fn {}(", helper.name())), "{helper:?}");
            for &other in Helper::ALL {
                let calls = source.contains(&format!("{}(", other.name()))
                    && !source.contains(&format!("fn {}(", other.name()));
                if calls {
                    assert!(helper.deps().contains(&other), "{helper:?} calls {other:?}");
                }
            }
            for dep in helper.deps() {
                for inner in dep.deps() {
                    assert!(
                        helper.deps().contains(inner),
                        "{helper:?} needs {inner:?} through {dep:?}"
                    );
                }
            }
        }
    }
}
