//! The one table of routines: `aot_routines!` lists each routine once (its variant, what it
//! computes, its element type, its C ABI and its function) and generates [`AotFn`], its `ALL`
//! order, its symbol, dtype, arity and address. A new routine is one line of the table; a new
//! [`UnaryOp`] or [`BinaryOp`] does not compile until [`AotFn::for_op`] or
//! [`AotFn::for_binary`] says whether it has routines.

use rfx_ir::{BinaryOp, DType, UnaryOp};

use super::{
    FusedFn, FusedFnF64, One2Fn, One2FnF64, OneFn, OneFnF64, OnePairFn, OnePairFnF64, Tile2Fn, Tile2FnF64,
    TileFn, TileFnF64, TilePairFn, TilePairFnF64, Vec2Fn, Vec2FnF64, VecFn, VecFnF64,
};

/// What a routine computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Computes {
    /// One unary op, one result tile.
    Unary(UnaryOp),
    /// One binary op of two source tiles.
    Binary(BinaryOp),
    /// `sin` and `cos` of one argument, into two result tiles.
    SinCos,
    /// A fused elementwise pass ([`super::fused`]): a plan, its constants and its rows, and
    /// the row length (three pointers and a count, the binary routines' C ABI shape).
    Fused,
}

/// Generates [`AotFn`] from the table: one line per routine,
/// `Variant: computes, dtype, abi, module::function, one module::inner: one_abi;` (`one`:
/// the routine's one-element entry `module::inner::one`, absent for a fused pass). The order of the lines is
/// [`AotFn::ALL`]'s (symbol registration and declaration iterate it, so it fixes the order
/// of the JIT module's imports). The symbol is the function's name, and the address is the
/// function coerced to `abi`, which checks it against the routine's C ABI.
macro_rules! aot_routines {
    ($(
        $(#[$doc:meta])*
        $variant:ident: $computes:expr, $dtype:ident, $abi:ty, $module:ident::$routine:ident
            $(, one $omodule:ident::$oinner:ident: $oabi:ident)?;
    )*) => {
        /// A routine the JIT code may call on tiles (`fn(src, dst, n)` and its binary and
        /// pair forms, [`TileFn`] and the other ABI types).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum AotFn {
            $($(#[$doc])* $variant,)*
        }

        impl AotFn {
            /// Every routine, in the table's order (symbol registration and declaration
            /// iterate this).
            pub(crate) const ALL: [AotFn; <[&str]>::len(&[$(stringify!($variant)),*])] =
                [$(AotFn::$variant),*];

            /// What it computes.
            pub(crate) fn computes(self) -> Computes {
                match self {
                    $(AotFn::$variant => $computes,)*
                }
            }

            /// The element type of its arguments and results.
            pub(crate) fn dtype(self) -> DType {
                match self {
                    $(AotFn::$variant => DType::$dtype,)*
                }
            }

            /// The symbol the JIT module imports it as.
            pub(crate) fn symbol(self) -> &'static str {
                match self {
                    $(AotFn::$variant => stringify!($routine),)*
                }
            }

            /// The routine's address, a function of its C ABI type.
            pub(crate) fn address(self) -> *const u8 {
                match self {
                    $(AotFn::$variant => (super::$module::$routine as $abi) as *const u8,)*
                }
            }

            /// The symbol and address of the routine's one-element entry (`fn(x) -> y`,
            /// `fn(a, b) -> y`, or `fn(x, *mut second) -> first`: [`OneFn`] and the other
            /// ABI types), which computes the bits the routine writes for one element; `None`
            /// for a fused pass, and off x86-64.
            pub(crate) fn one(self) -> Option<(&'static str, *const u8)> {
                match self {
                    $(AotFn::$variant => aot_routines!(@one $routine $(, $omodule::$oinner: $oabi)?),)*
                }
            }

            /// The address of the routine's block entry for this CPU (`fn(src, dst)` or
            /// `fn(a, b, dst)` on [`BLOCK_BYTES`](super::BLOCK_BYTES) of elements: [`VecFn`]
            /// and the other ABI types), which writes the bits the routine writes for them:
            /// its AVX-512 compilation where the CPU has AVX-512 F and VL ([`AotFn::block_for`]).
            /// `None` for a routine with two results or a fused pass, and off x86-64.
            pub(crate) fn block(self) -> Option<*const u8> {
                #[cfg(target_arch = "x86_64")]
                let wide = super::avx512();
                #[cfg(not(target_arch = "x86_64"))]
                let wide = false;
                self.block_for(wide)
            }

            /// The block entry compiled for AVX2 (`wide` false) or AVX-512 (true): the same
            /// formulas, so the same bits.
            pub(crate) fn block_for(self, wide: bool) -> Option<*const u8> {
                match self {
                    $(AotFn::$variant => aot_routines!(@vector wide, $($oabi, $omodule::$oinner)?),)*
                }
            }
        }
    };
    (@vector $wide:ident,) => {
        None
    };
    (@vector $wide:ident, OnePairFn, $omodule:ident::$oinner:ident) => {
        None
    };
    (@vector $wide:ident, OnePairFnF64, $omodule:ident::$oinner:ident) => {
        None
    };
    (@vector $wide:ident, OneFn, $omodule:ident::$oinner:ident) => {
        aot_routines!(@vector_of $wide, VecFn, $omodule::$oinner)
    };
    (@vector $wide:ident, OneFnF64, $omodule:ident::$oinner:ident) => {
        aot_routines!(@vector_of $wide, VecFnF64, $omodule::$oinner)
    };
    (@vector $wide:ident, One2Fn, $omodule:ident::$oinner:ident) => {
        aot_routines!(@vector_of $wide, Vec2Fn, $omodule::$oinner)
    };
    (@vector $wide:ident, One2FnF64, $omodule:ident::$oinner:ident) => {
        aot_routines!(@vector_of $wide, Vec2FnF64, $omodule::$oinner)
    };
    (@vector_of $wide:ident, $vabi:ty, $omodule:ident::$oinner:ident) => {{
        #[cfg(target_arch = "x86_64")]
        let vector = Some(if $wide {
            (super::$omodule::$oinner::block_wide as $vabi) as *const u8
        } else {
            (super::$omodule::$oinner::block as $vabi) as *const u8
        });
        #[cfg(not(target_arch = "x86_64"))]
        let vector = {
            let _ = $wide;
            None
        };
        vector
    }};
    (@one $routine:ident) => {
        None
    };
    (@one $routine:ident, $omodule:ident::$oinner:ident: $oabi:ident) => {{
        #[cfg(target_arch = "x86_64")]
        let one = Some((
            concat!(stringify!($routine), "_one"),
            (super::$omodule::$oinner::one as $oabi) as *const u8,
        ));
        #[cfg(not(target_arch = "x86_64"))]
        let one = None;
        one
    }};
}

use Computes::{Binary, Fused, SinCos, Unary};

aot_routines! {
    SinF32: Unary(UnaryOp::Sin), F32, TileFn, f32::rfx_aot_sin_f32, one f32::sin_f32_avx2: OneFn;
    CosF32: Unary(UnaryOp::Cos), F32, TileFn, f32::rfx_aot_cos_f32, one f32::cos_f32_avx2: OneFn;
    TanF32: Unary(UnaryOp::Tan), F32, TileFn, f32::rfx_aot_tan_f32, one f32::tan_f32_avx2: OneFn;
    ExpF32: Unary(UnaryOp::Exp), F32, TileFn, f32::rfx_aot_exp_f32, one f32::exp_f32_avx2: OneFn;
    Exp2F32: Unary(UnaryOp::Exp2), F32, TileFn, f32::rfx_aot_exp2_f32, one f32::exp2_f32_avx2: OneFn;
    LogF32: Unary(UnaryOp::Log), F32, TileFn, f32::rfx_aot_log_f32, one f32::log_f32_avx2: OneFn;
    Log2F32: Unary(UnaryOp::Log2), F32, TileFn, f32::rfx_aot_log2_f32, one f32::log2_f32_avx2: OneFn;
    TanhF32: Unary(UnaryOp::Tanh), F32, TileFn, f32::rfx_aot_tanh_f32, one f32::tanh_f32_avx2: OneFn;
    SigmoidF32: Unary(UnaryOp::Sigmoid), F32, TileFn, f32::rfx_aot_sigmoid_f32, one f32::sigmoid_f32_avx2: OneFn;
    AtanF32: Unary(UnaryOp::Atan), F32, TileFn, f32::rfx_aot_atan_f32, one f32::atan_f32_avx2: OneFn;
    Atan2F32: Binary(BinaryOp::Atan2), F32, Tile2Fn, f32::rfx_aot_atan2_f32, one f32::atan2_f32_avx2: One2Fn;
    AsinF32: Unary(UnaryOp::Asin), F32, TileFn, f32::rfx_aot_asin_f32, one f32::asin_f32_avx2: OneFn;
    AcosF32: Unary(UnaryOp::Acos), F32, TileFn, f32::rfx_aot_acos_f32, one f32::acos_f32_avx2: OneFn;
    SinF64: Unary(UnaryOp::Sin), F64, TileFnF64, f64::rfx_aot_sin_f64, one f64::sin_f64_avx2: OneFnF64;
    CosF64: Unary(UnaryOp::Cos), F64, TileFnF64, f64::rfx_aot_cos_f64, one f64::cos_f64_avx2: OneFnF64;
    ExpF64: Unary(UnaryOp::Exp), F64, TileFnF64, f64::rfx_aot_exp_f64, one f64::exp_f64_avx2: OneFnF64;
    LogF64: Unary(UnaryOp::Log), F64, TileFnF64, f64::rfx_aot_log_f64, one f64::log_f64_avx2: OneFnF64;
    AtanF64: Unary(UnaryOp::Atan), F64, TileFnF64, f64::rfx_aot_atan_f64, one f64::atan_f64_avx2: OneFnF64;
    Atan2F64: Binary(BinaryOp::Atan2), F64, Tile2FnF64, f64::rfx_aot_atan2_f64, one f64::atan2_f64_avx2: One2FnF64;
    AsinF64: Unary(UnaryOp::Asin), F64, TileFnF64, f64::rfx_aot_asin_f64, one f64::asin_f64_avx2: OneFnF64;
    AcosF64: Unary(UnaryOp::Acos), F64, TileFnF64, f64::rfx_aot_acos_f64, one f64::acos_f64_avx2: OneFnF64;
    TanhF64: Unary(UnaryOp::Tanh), F64, TileFnF64, f64::rfx_aot_tanh_f64, one f64::tanh_f64_avx2: OneFnF64;
    SigmoidF64: Unary(UnaryOp::Sigmoid), F64, TileFnF64, f64::rfx_aot_sigmoid_f64, one f64::sigmoid_f64_avx2: OneFnF64;
    PowF32: Binary(BinaryOp::Pow), F32, Tile2Fn, pow::rfx_aot_pow_f32, one pow::pow_f32_avx2: One2Fn;
    PowF64: Binary(BinaryOp::Pow), F64, Tile2FnF64, pow::rfx_aot_pow_f64, one pow::pow_f64_avx2: One2FnF64;
    TanF64: Unary(UnaryOp::Tan), F64, TileFnF64, f64::rfx_aot_tan_f64, one f64::tan_f64_avx2: OneFnF64;
    Exp2F64: Unary(UnaryOp::Exp2), F64, TileFnF64, f64::rfx_aot_exp2_f64, one f64::exp2_f64_avx2: OneFnF64;
    Log2F64: Unary(UnaryOp::Log2), F64, TileFnF64, f64::rfx_aot_log2_f64, one f64::log2_f64_avx2: OneFnF64;
    /// `sin` and `cos` of one argument, into two result tiles (`fn(src, sin, cos, n)`).
    SinCosF32: SinCos, F32, TilePairFn, f32::rfx_aot_sincos_f32, one f32::sincos_f32_avx2: OnePairFn;
    /// The `f64` `sin` and `cos` of one argument: one reduction, both polynomials.
    SinCosF64: SinCos, F64, TilePairFnF64, f64::rfx_aot_sincos_f64, one f64::sincos_f64_avx2: OnePairFnF64;
    /// Whole-row binary exact ops (`fn(a, b, d, n)`): a one-op fused pass on two input rows.
    AddF32: Binary(BinaryOp::Add), F32, Tile2Fn, fused::rfx_aot_add_f32;
    SubF32: Binary(BinaryOp::Sub), F32, Tile2Fn, fused::rfx_aot_sub_f32;
    MulF32: Binary(BinaryOp::Mul), F32, Tile2Fn, fused::rfx_aot_mul_f32;
    DivF32: Binary(BinaryOp::Div), F32, Tile2Fn, fused::rfx_aot_div_f32;
    MinF32: Binary(BinaryOp::Min), F32, Tile2Fn, fused::rfx_aot_min_f32;
    MaxF32: Binary(BinaryOp::Max), F32, Tile2Fn, fused::rfx_aot_max_f32;
    AddF64: Binary(BinaryOp::Add), F64, Tile2FnF64, fused::rfx_aot_add_f64;
    SubF64: Binary(BinaryOp::Sub), F64, Tile2FnF64, fused::rfx_aot_sub_f64;
    MulF64: Binary(BinaryOp::Mul), F64, Tile2FnF64, fused::rfx_aot_mul_f64;
    DivF64: Binary(BinaryOp::Div), F64, Tile2FnF64, fused::rfx_aot_div_f64;
    MinF64: Binary(BinaryOp::Min), F64, Tile2FnF64, fused::rfx_aot_min_f64;
    MaxF64: Binary(BinaryOp::Max), F64, Tile2FnF64, fused::rfx_aot_max_f64;
    /// A fused elementwise pass over `f32` rows (`fn(plan, consts, rows, n)`).
    FusedF32: Fused, F32, FusedFn, fused::rfx_aot_fused_f32;
    /// A fused elementwise pass over `f64` rows.
    FusedF64: Fused, F64, FusedFnF64, fused::rfx_aot_fused_f64;
}

impl AotFn {
    /// The routine in the table computing `computes` on `dtype`, if there is one.
    fn find(computes: Computes, dtype: DType) -> Option<AotFn> {
        AotFn::ALL
            .iter()
            .copied()
            .find(|r| r.computes() == computes && r.dtype() == dtype)
    }

    /// The routine computing `op` on `dtype`, if there is one. Every op is named here: a new
    /// transcendental must say whether it has routines.
    pub(crate) fn for_op(op: UnaryOp, dtype: DType) -> Option<AotFn> {
        match op {
            UnaryOp::Exp
            | UnaryOp::Exp2
            | UnaryOp::Log
            | UnaryOp::Log2
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Atan
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Sigmoid => AotFn::find(Computes::Unary(op), dtype),
            // No routine: the inline polynomials compute it on every path, so its bits are the
            // same in tiles and scalar code.
            UnaryOp::Erf => None,
            // Exact or cheap ops the inline code computes as fast as a call would.
            rfx_ir::exact_unary_ops!() => None,
        }
    }

    /// The routine computing the binary `op` on `dtype`, if there is one. Every op is named
    /// here, as in [`AotFn::for_op`].
    pub(crate) fn for_binary(op: BinaryOp, dtype: DType) -> Option<AotFn> {
        match op {
            BinaryOp::Pow | BinaryOp::Atan2 => AotFn::find(Computes::Binary(op), dtype),
            rfx_ir::exact_binary_ops!() => None,
        }
    }

    /// The whole-row routine of the binary exact `op` on `dtype` ([`Plan::row_binary`]'s
    /// ops), if there is one.
    ///
    /// [`Plan::row_binary`]: super::fused::Plan::row_binary
    pub(crate) fn whole_row(op: BinaryOp, dtype: DType) -> Option<AotFn> {
        match op {
            rfx_ir::exact_binary_ops!() => AotFn::find(Computes::Binary(op), dtype),
            BinaryOp::Pow | BinaryOp::Atan2 => None,
        }
    }

    /// How many source tiles it reads (a fused pass: its plan and constants).
    pub(crate) fn arity(self) -> usize {
        match self.computes() {
            Computes::Binary(_) | Computes::Fused => 2,
            Computes::Unary(_) | Computes::SinCos => 1,
        }
    }

    /// How many result tiles it writes: two for `sincos`, one for the others (a fused pass:
    /// its row pointers).
    pub(crate) fn results(self) -> usize {
        match self.computes() {
            Computes::SinCos => 2,
            Computes::Unary(_) | Computes::Binary(_) | Computes::Fused => 1,
        }
    }

    /// The `sincos` routine a `sin` or `cos` routine pairs into, and the result it takes there
    /// (0: `sin`, 1: `cos`).
    pub(crate) fn sincos_part(self) -> Option<(AotFn, usize)> {
        let part = match self.computes() {
            Computes::Unary(UnaryOp::Sin) => 0,
            Computes::Unary(UnaryOp::Cos) => 1,
            _ => return None,
        };
        Some((AotFn::find(Computes::SinCos, self.dtype())?, part))
    }
}
