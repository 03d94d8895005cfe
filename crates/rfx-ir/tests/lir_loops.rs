//! LIR programs with loops over ranges of kernels: text round trip, verifier rules and the
//! reference interpreter, checked against closed forms.

#![allow(clippy::unwrap_used)]

use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{self, LirProgram, VerifyErrorKind, VerifyLocation, parse};
use rfx_ir::repeat::{KernelLoop, LoopNestError};
use rfx_ir::{Array, BufId, Scalar};

const HEAD: &str = "vector 1 thread_min 16384 tile 1024 lanes 1";

/// `c = x; repeat TRIPS times { n = 2c + 1; c = n }; y = c`: `y = (x + 1) * 2^TRIPS - 1`.
/// The carry `buf2` and the body's temp `buf3` sit at `n_offset` apart.
fn doubling(trips: u64, n_offset: usize) -> String {
    format!(
        "\
lir doubling arena 48 align 8 {{
  buf0: f64[3] = input x
  buf1: f64[3] = output y
  buf2: f64[3] = arena 0
  buf3: f64[3] = arena {n_offset}
  kernel init dims [3] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf0 [1]
      store buf2 [1] = s0
    }}
  }}
  kernel step dims [3] reduce 0 {HEAD} {{
    slots [f64, f64, f64, f64, f64]
    preamble {{
      s1 = const 2.0
      s2 = const 1.0
    }}
    body {{
      s0 = load buf2 [1]
      s3 = mul s0, s1
      s4 = add s3, s2
      store buf3 [1] = s4
    }}
  }}
  kernel carry dims [3] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf3 [1]
      store buf2 [1] = s0
    }}
  }}
  kernel finish dims [3] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf2 [1]
      store buf1 [1] = s0
    }}
  }}
  loop kernels 1..3 trips {trips}
}}
"
    )
}

/// A while loop over one scalar: `c = 2c + 1` while the new `c` is below 100, at most `trips`
/// times; the flag is `buf4`.
fn while_program(trips: u64) -> String {
    format!(
        "\
lir while_doubling arena 24 align 8 {{
  buf0: f64[] = input x
  buf1: f64[] = output y
  buf2: f64[] = arena 0
  buf3: f64[] = arena 8
  buf4: bool[] = arena 16
  kernel init dims [] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf0 []
      store buf2 [] = s0
    }}
  }}
  kernel step dims [] reduce 0 {HEAD} {{
    slots [f64, f64, f64, bool]
    preamble {{}}
    body {{
      s0 = load buf2 []
      s1 = const 2.0
      s0 = mul s0, s1
      s1 = const 1.0
      s0 = add s0, s1
      store buf3 [] = s0
      s2 = const 100.0
      s3 = lt s0, s2
      store buf4 [] = s3
    }}
  }}
  kernel carry dims [] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf3 []
      store buf2 [] = s0
    }}
  }}
  kernel finish dims [] reduce 0 {HEAD} {{
    slots [f64]
    preamble {{}}
    body {{
      s0 = load buf2 []
      store buf1 [] = s0
    }}
  }}
  loop kernels 1..3 trips {trips} exit buf4
}}
"
    )
}

fn verified(text: &str) -> LirProgram {
    let program = parse(text).unwrap();
    lir::verify(&program).unwrap_or_else(|e| panic!("{e}"));
    program
}

fn kinds(program: &LirProgram) -> Vec<(VerifyLocation, VerifyErrorKind)> {
    let errors = lir::verify(program).expect_err("the program breaks a rule");
    errors
        .errors()
        .iter()
        .map(|e| (e.location, e.kind.clone()))
        .collect()
}

#[test]
fn loop_lines_round_trip_exactly() {
    for text in [doubling(10, 24), while_program(50)] {
        let program = verified(&text);
        assert_eq!(program.to_string(), text);
        assert_eq!(parse(&program.to_string()).unwrap(), program);
    }
    assert_eq!(
        parse(&while_program(9)).unwrap().loops(),
        [KernelLoop {
            first: 1,
            end: 3,
            trips: 9,
            exit: Some(BufId::new(4))
        }]
    );
}

#[test]
fn a_loop_runs_its_range_trips_times() {
    let x = Array::from_slice(&[0.0f64, 1.5, -3.0]);
    for (trips, mode) in [
        (10, Mode::Native),
        (10, Mode::Oracle),
        (0, Mode::Native),
        (1, Mode::Native),
    ] {
        let y = run_lir(&verified(&doubling(trips, 24)), &[x.view()], mode).unwrap();
        let scale = 2f64.powi(i32::try_from(trips).unwrap());
        let expected: Vec<f64> = [0.0f64, 1.5, -3.0]
            .iter()
            .map(|x| (x + 1.0) * scale - 1.0)
            .collect();
        assert_eq!(y[0].as_slice::<f64>().unwrap(), expected, "{trips} trips");
    }
}

#[test]
fn a_carry_sharing_bytes_with_the_body_temp_is_overwritten() {
    // The interpreter models the arena as bytes: a plan that puts the carry and the body's
    // temp at the same offset makes `step` overwrite the carry it reads. Each point reads its
    // own element before writing it, so the loop still computes 2c + 1 here; with the temp one
    // element later, point i writes element i + 1 of the carry before point i + 1 reads it.
    let x = Array::from_slice(&[0.0f64, 1.5, -3.0]);
    let shifted = verified(&doubling(2, 8));
    let y = run_lir(&shifted, &[x.view()], Mode::Native).unwrap();
    let good = run_lir(&verified(&doubling(2, 24)), &[x.view()], Mode::Native).unwrap();
    assert_eq!(good[0].as_slice::<f64>().unwrap(), [3.0, 9.0, -9.0]);
    assert_ne!(
        y[0].as_slice::<f64>().unwrap(),
        good[0].as_slice::<f64>().unwrap()
    );
}

#[test]
fn an_exit_flag_stops_the_loop_after_an_iteration_that_leaves_it_false() {
    let cases = [
        (1.0, 50, 127.0),
        (1.0, 3, 15.0),
        (200.0, 50, 401.0),
        (-1.0, 1000, -1.0),
    ];
    for (x, trips, y) in cases {
        let x = Array::scalar(Scalar::F64(x));
        let out = run_lir(&verified(&while_program(trips)), &[x.view()], Mode::Native).unwrap();
        assert_eq!(out[0].as_slice::<f64>().unwrap(), [y]);
    }
}

#[test]
fn malformed_loop_lines_are_parse_errors_with_positions() {
    let text = doubling(10, 24);
    let cases = [
        (
            text.replace("loop kernels 1..3", "loop kernels 1.3"),
            "43:16: expected a kernel range `FIRST..END`, found `1.3`",
        ),
        (
            text.replace("trips 10", "trips ten"),
            "43:27: expected a trip count, found `ten`",
        ),
        (
            text.replace("trips 10", "trips 10 exit"),
            "44:1: expected a declared buffer, found `}`",
        ),
        (
            text.replace("trips 10", "trips 10 loop"),
            "44:1: expected `kernels`, found `}`",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(parse(&text).expect_err(message).to_string(), message);
    }
}

#[test]
fn loop_rules_are_verifier_errors() {
    let base = parse(&doubling(10, 24)).unwrap();
    let with = |loops: Vec<KernelLoop>| base.clone().with_loops(loops);
    let range = |first, end, trips, exit| KernelLoop {
        first,
        end,
        trips,
        exit,
    };
    assert_eq!(
        kinds(&with(vec![range(1, 3, 2, None), range(2, 4, 1, None)])),
        [
            (
                VerifyLocation::Body { kernel: 3, index: 1 },
                VerifyErrorKind::OutputWrittenInLoop(BufId::new(1))
            ),
            (
                VerifyLocation::Loop(1),
                VerifyErrorKind::LoopNest(LoopNestError::Overlap { index: 1 })
            )
        ]
    );
    assert_eq!(
        kinds(&with(vec![range(3, 3, 2, None)])),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::LoopNest(LoopNestError::Range {
                index: 0,
                first: 3,
                end: 3,
                kernels: 4
            })
        )]
    );
    // The flag must be a one-element bool arena buffer written inside the range.
    assert_eq!(
        kinds(&with(vec![range(1, 3, 2, Some(BufId::new(3)))])),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::ExitFlagType(BufId::new(3))
        )]
    );
    assert_eq!(
        kinds(&with(vec![range(2, 3, 2, Some(BufId::new(7)))])),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::UnknownBuffer(BufId::new(7))
        )]
    );
    let flag_outside =
        parse(&while_program(4))
            .unwrap()
            .with_loops(vec![range(2, 3, 4, Some(BufId::new(4)))]);
    assert_eq!(
        kinds(&flag_outside),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::ExitFlagNotWritten(BufId::new(4))
        )]
    );
    // A loop of zero trips may skip the write of `buf3`, which `finish` then reads.
    let skipped = parse(&doubling(0, 24).replace(
        "    body {\n      s0 = load buf2 [1]\n      store buf1",
        "    body {\n      s0 = load buf3 [1]\n      store buf1",
    ))
    .unwrap();
    assert_eq!(
        kinds(&skipped),
        [(
            VerifyLocation::Body { kernel: 3, index: 0 },
            VerifyErrorKind::ReadBeforeWrite(BufId::new(3))
        )]
    );
    verified(&skipped.with_loops(vec![range(1, 3, 1, None)]).to_string());
}

#[test]
fn printed_errors_follow_the_loop_line_they_concern() {
    let program = parse(&doubling(4, 24).replace("trips 4", "trips 4 exit buf3")).unwrap();
    let errors = lir::verify(&program).unwrap_err();
    assert_eq!(
        errors.errors()[0].to_string(),
        "loop #0: exit flag buf3 is not a one-element bool arena buffer"
    );
    assert!(
        errors.to_string().ends_with(
            "  loop kernels 1..3 trips 4 exit buf3\n  # error: exit flag buf3 is not a one-element bool arena buffer\n}\n"
        ),
        "{errors}"
    );
    let interp = run_lir(errors.program(), &[], Mode::Native).unwrap_err();
    assert!(matches!(interp, rfx_ir::interp::InterpError::InvalidLir(_)));
}
