//! Which kernels run Cranelift's mid-end before they are compiled: those of
//! [`MID_END_MIN_BODY`] LIR instructions or more (preamble and body), whatever their domain
//! (at one element the chain is all preamble).

use rfx_ir::mir;
use rfx_lower::{LowerConfig, lower};

use super::{MID_END_MIN_BODY, wants_mid_end};

/// A `[n]` kernel of one load, `ops` chained multiplications by itself and one store.
fn body_lengths(n: usize, ops: usize) -> Vec<usize> {
    let mut text = format!(
        "mir chain {{\n  buf0: f64[{n}] = input x\n  buf1: f64[{n}] = output y\n  kernel k [{n}] {{\n    %0 = load buf0 [1] : f64\n"
    );
    for i in 0..ops {
        text += &format!("    %{} = mul %{i}, %{i} : f64\n", i + 1);
    }
    text += &format!("    store buf1 [1] = %{ops}\n  }}\n}}\n");
    let program = mir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (lir, _) = lower(&program, &LowerConfig::default()).expect("lower");
    let kernels = lir.kernels();
    assert!(!kernels.is_empty());
    kernels
        .iter()
        .map(|k| {
            let len = k.preamble.len() + k.body.len();
            assert_eq!(wants_mid_end(k), len >= MID_END_MIN_BODY);
            len
        })
        .collect()
}

#[test]
fn only_kernels_of_the_minimum_body_or_more_run_the_mid_end() {
    for n in [1, 1024] {
        let small = body_lengths(n, 20);
        assert!(small.iter().all(|&len| len < MID_END_MIN_BODY), "{small:?}");
        let large = body_lengths(n, 300);
        assert!(large.iter().any(|&len| len >= MID_END_MIN_BODY), "{large:?}");
    }
}
