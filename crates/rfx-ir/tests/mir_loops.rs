//! MIR programs with loops over ranges of kernels: text round trip, verifier rules and the
//! reference interpreter, checked against closed forms.

#![allow(clippy::unwrap_used)]

use rfx_ir::interp::{InterpError, Mode, run_mir};
use rfx_ir::mir::{self, MirProgram, VerifyErrorKind, VerifyLocation, parse};
use rfx_ir::repeat::{KernelLoop, LoopNestError};
use rfx_ir::{Array, BufId};

/// `c = x; repeat 10 times { n = 2c + 1; c = n }; y = c`: `y = (x + 1) * 2^10 - 1`.
const DOUBLING: &str = "\
mir doubling {
  buf0: f64[3] = input x
  buf1: f64[3] = output y
  buf2: f64[3] = temp
  buf3: f64[3] = temp
  kernel init [3] {
    %0 = load buf0 [1] : f64
    store buf2 = %0
  }
  kernel step [3] {
    %0 = load buf2 [1] : f64
    %1 = const 2.0 : f64
    %2 = mul %0, %1 : f64
    %3 = const 1.0 : f64
    %4 = add %2, %3 : f64
    store buf3 = %4
  }
  kernel carry [3] {
    %0 = load buf3 [1] : f64
    store buf2 = %0
  }
  kernel finish [3] {
    %0 = load buf2 [1] : f64
    store buf1 = %0
  }
  loop kernels 1..3 trips 10
}
";

/// An outer loop of 3 trips around an inner one of 4: the inner loop counts `cnt` up from
/// `acc` by 4, then `acc = 2 * cnt`; so `acc' = 2 (acc + 4)` and `y = 8x + 56`.
const NESTED: &str = "\
mir nested {
  buf0: f64[2] = input x
  buf1: f64[2] = output y
  buf2: f64[2] = temp
  buf3: f64[2] = temp
  buf4: f64[2] = temp
  buf5: f64[2] = temp
  kernel init [2] {
    %0 = load buf0 [1] : f64
    store buf2 = %0
  }
  kernel inner_init [2] {
    %0 = load buf2 [1] : f64
    store buf3 = %0
  }
  kernel count [2] {
    %0 = load buf3 [1] : f64
    %1 = const 1.0 : f64
    %2 = add %0, %1 : f64
    store buf4 = %2
  }
  kernel inner_carry [2] {
    %0 = load buf4 [1] : f64
    store buf3 = %0
  }
  kernel twice [2] {
    %0 = load buf3 [1] : f64
    %1 = const 2.0 : f64
    %2 = mul %0, %1 : f64
    store buf5 = %2
  }
  kernel outer_carry [2] {
    %0 = load buf5 [1] : f64
    store buf2 = %0
  }
  kernel finish [2] {
    %0 = load buf2 [1] : f64
    store buf1 = %0
  }
  loop kernels 1..6 trips 3
  loop kernels 2..4 trips 4
}
";

/// A while loop: `c = 2c + 1` and `i = i + 1` while the new `c` is below 100, at most `TRIPS`
/// times; the step writes the flag `c' < 100` to `buf6`.
fn while_program(trips: u64) -> String {
    format!(
        "\
mir while_doubling {{
  buf0: f64[] = input x
  buf1: f64[] = output y
  buf2: i32[] = output iterations
  buf3: f64[] = temp
  buf4: f64[] = temp
  buf5: i32[] = temp
  buf6: bool[] = temp
  buf7: i32[] = temp
  kernel init [] {{
    %0 = load buf0 [] : f64
    %1 = const 0 : i32
    store buf3 = %0
    store buf5 = %1
  }}
  kernel step [] {{
    %0 = load buf3 [] : f64
    %1 = const 2.0 : f64
    %2 = mul %0, %1 : f64
    %3 = const 1.0 : f64
    %4 = add %2, %3 : f64
    %5 = const 100.0 : f64
    %6 = lt %4, %5 : bool
    %7 = load buf5 [] : i32
    %8 = const 1 : i32
    %9 = add %7, %8 : i32
    store buf4 = %4
    store buf6 = %6
    store buf7 = %9
  }}
  kernel carry [] {{
    %0 = load buf4 [] : f64
    %1 = load buf7 [] : i32
    store buf3 = %0
    store buf5 = %1
  }}
  kernel finish [] {{
    %0 = load buf3 [] : f64
    %1 = load buf5 [] : i32
    store buf1 = %0
    store buf2 = %1
  }}
  loop kernels 1..3 trips {trips} exit buf6
}}
"
    )
}

fn verified(text: &str) -> MirProgram {
    let program = parse(text).unwrap();
    mir::verify(&program).unwrap_or_else(|e| panic!("{e}"));
    program
}

fn kinds(text: &str) -> Vec<(VerifyLocation, VerifyErrorKind)> {
    let program = parse(text).unwrap();
    let errors = mir::verify(&program).expect_err("the program breaks a rule");
    errors
        .errors()
        .iter()
        .map(|e| (e.location, e.kind.clone()))
        .collect()
}

#[test]
fn loop_lines_round_trip_exactly() {
    for text in [DOUBLING, NESTED, &while_program(50)] {
        let program = verified(text);
        assert_eq!(program.to_string(), text);
        assert_eq!(parse(&program.to_string()).unwrap(), program);
    }
    let program = parse(NESTED).unwrap();
    assert_eq!(
        program.loops(),
        [
            KernelLoop {
                first: 1,
                end: 6,
                trips: 3,
                exit: None
            },
            KernelLoop {
                first: 2,
                end: 4,
                trips: 4,
                exit: None
            }
        ]
    );
    let while_loop = parse(&while_program(7)).unwrap();
    assert_eq!(while_loop.loops()[0].exit, Some(BufId::new(6)));
    assert_eq!(while_loop.loops()[0].trips, 7);
}

#[test]
fn a_loop_runs_its_range_trips_times() {
    let program = verified(DOUBLING);
    let x = Array::from_slice(&[0.0f64, 1.5, -3.0]);
    for mode in [Mode::Native, Mode::Oracle] {
        let y = run_mir(&program, &[x.view()], mode).unwrap();
        let expected: Vec<f64> = [0.0f64, 1.5, -3.0]
            .iter()
            .map(|x| (x + 1.0) * 1024.0 - 1.0)
            .collect();
        assert_eq!(y[0].as_slice::<f64>().unwrap(), expected);
    }
    // Zero trips: the range never runs, the initial carry comes out.
    let zero = verified(&DOUBLING.replace("trips 10", "trips 0"));
    let y = run_mir(&zero, &[x.view()], Mode::Native).unwrap();
    assert_eq!(y[0].as_slice::<f64>().unwrap(), [0.0, 1.5, -3.0]);
}

#[test]
fn nested_loops_run_the_inner_range_per_outer_iteration() {
    let program = verified(NESTED);
    let x = Array::from_slice(&[1.0f64, -2.5]);
    let y = run_mir(&program, &[x.view()], Mode::Native).unwrap();
    let expected: Vec<f64> = [1.0f64, -2.5].iter().map(|x| 8.0 * x + 56.0).collect();
    assert_eq!(y[0].as_slice::<f64>().unwrap(), expected);
}

#[test]
fn an_exit_flag_stops_the_loop_after_an_iteration_that_leaves_it_false() {
    // 1 -> 3 -> 7 -> 15 -> 31 -> 63 -> 127: the sixth iteration leaves `127 < 100` false.
    let x = Array::scalar(rfx_ir::Scalar::F64(1.0));
    let out = run_mir(&verified(&while_program(50)), &[x.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), [127.0]);
    assert_eq!(out[1].as_slice::<i32>().unwrap(), [6]);
    // The trip count still bounds the loop.
    let out = run_mir(&verified(&while_program(3)), &[x.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), [15.0]);
    assert_eq!(out[1].as_slice::<i32>().unwrap(), [3]);
    // A flag false after the first iteration: one iteration runs.
    let big = Array::scalar(rfx_ir::Scalar::F64(200.0));
    let out = run_mir(&verified(&while_program(50)), &[big.view()], Mode::Oracle).unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), [401.0]);
    assert_eq!(out[1].as_slice::<i32>().unwrap(), [1]);
}

#[test]
fn malformed_loop_lines_are_parse_errors_with_positions() {
    let cases = [
        (
            DOUBLING.replace("loop kernels 1..3", "loop kernels 1 3"),
            "26:16: expected a kernel range `FIRST..END`, found `1`",
        ),
        (
            DOUBLING.replace("loop kernels 1..3", "loop kernels 1..x3"),
            "26:16: expected a kernel range `FIRST..END`, found `1..x3`",
        ),
        (
            DOUBLING.replace("loop kernels", "loop"),
            "26:8: expected `kernels`, found `1..3`",
        ),
        (
            DOUBLING.replace("trips 10", "trip 10"),
            "26:21: expected `trips`, found `trip`",
        ),
        (
            DOUBLING.replace("trips 10", "trips -1"),
            "26:27: expected a trip count, found `-1`",
        ),
        (
            DOUBLING.replace("trips 10", "trips 10 exit buf9"),
            "26:35: expected a declared buffer, found `buf9`",
        ),
        (
            DOUBLING.replace(
                "  loop kernels 1..3 trips 10\n",
                "  loop kernels 1..3 trips 10\n  kernel late [3] {\n  }\n",
            ),
            "27:3: expected `loop` or `}`, found `kernel`",
        ),
    ];
    for (text, message) in cases {
        let err = parse(&text).expect_err(message);
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn loops_that_do_not_nest_are_loop_nest_errors() {
    let past_end = DOUBLING.replace("loop kernels 1..3", "loop kernels 5..9");
    let found = kinds(&past_end);
    assert!(
        found.contains(&(
            VerifyLocation::Loop(0),
            VerifyErrorKind::LoopNest(LoopNestError::Range {
                index: 0,
                first: 5,
                end: 9,
                kernels: 4
            })
        )),
        "{found:?}"
    );
    let overlap = DOUBLING.replace(
        "loop kernels 1..3 trips 10",
        "loop kernels 0..2 trips 1\n  loop kernels 1..3 trips 10",
    );
    let found = kinds(&overlap);
    assert!(
        found.contains(&(
            VerifyLocation::Loop(1),
            VerifyErrorKind::LoopNest(LoopNestError::Overlap { index: 1 })
        )),
        "{found:?}"
    );
    // The printed errors follow the loop line they concern.
    let errors = mir::verify(&parse(&past_end).unwrap()).unwrap_err();
    assert!(
        errors.to_string().contains(
            "  loop kernels 5..9 trips 10\n  # error: loop 0 over kernels 5..9 is empty or past the program's 4 kernels\n}"
        ),
        "{errors}"
    );
    let interp = run_mir(errors.program(), &[], Mode::Native).unwrap_err();
    assert!(matches!(interp, InterpError::InvalidMir(_)));
}

#[test]
fn exit_flags_are_one_element_bool_temps_written_inside_the_loop() {
    let f64_flag = while_program(5).replace("exit buf6", "exit buf3");
    assert_eq!(
        kinds(&f64_flag),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::ExitFlagType(BufId::new(3))
        )]
    );
    // Written only before the loop.
    let outside = while_program(5)
        .replace("store buf6 = %6", "store buf4 = %4")
        .replace(
            "    store buf4 = %4\n    store buf4 = %4\n",
            "    store buf4 = %4\n",
        )
        .replace(
            "    %1 = const 0 : i32\n",
            "    %1 = const 0 : i32\n    %2 = const true : bool\n    store buf6 = %2\n",
        );
    assert_eq!(
        kinds(&outside),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::ExitFlagNotWritten(BufId::new(6))
        )]
    );
    let i32_flag = while_program(5).replace("exit buf6", "exit buf7");
    assert_eq!(
        kinds(&i32_flag),
        [(
            VerifyLocation::Loop(0),
            VerifyErrorKind::ExitFlagType(BufId::new(7))
        )]
    );
    let unknown = parse(DOUBLING).unwrap().with_loops(vec![KernelLoop {
        first: 1,
        end: 3,
        trips: 2,
        exit: Some(BufId::new(40)),
    }]);
    let errors = mir::verify(&unknown).unwrap_err();
    assert_eq!(errors.errors().len(), 1, "{errors}");
    assert_eq!(errors.errors()[0].location, VerifyLocation::Loop(0));
    assert_eq!(
        errors.errors()[0].kind,
        VerifyErrorKind::UnknownBuffer(BufId::new(40))
    );
}

#[test]
fn outputs_are_written_outside_loops_and_temps_rewritten_only_inside() {
    // The loop range reaches the kernel that writes the output.
    let into_output = DOUBLING.replace("loop kernels 1..3", "loop kernels 1..4");
    let found = kinds(&into_output);
    assert!(
        found.contains(&(
            VerifyLocation::Store { kernel: 3, index: 0 },
            VerifyErrorKind::OutputWrittenInLoop(BufId::new(1))
        )),
        "{found:?}"
    );
    // Without the loop, the carry is a buffer written twice.
    let no_loop = DOUBLING.replace("  loop kernels 1..3 trips 10\n", "");
    assert_eq!(
        kinds(&no_loop),
        [(
            VerifyLocation::Buffer(BufId::new(2)),
            VerifyErrorKind::MultipleWrites {
                buf: BufId::new(2),
                count: 2
            }
        )]
    );
}

#[test]
fn reads_need_a_write_that_surely_ran_before() {
    // The carry is read in the range before the range writes it, and nothing wrote it before.
    let no_init = DOUBLING.replace(
        "    %0 = load buf0 [1] : f64\n    store buf2 = %0\n",
        "    %0 = load buf0 [1] : f64\n    store buf3 = %0\n",
    );
    let found = kinds(&no_init);
    assert!(
        found.contains(&(
            VerifyLocation::Value {
                kernel: 1,
                value: mir::MirValue::new(0)
            },
            VerifyErrorKind::ReadBeforeWrite(BufId::new(2))
        )),
        "{found:?}"
    );
    // A zero-trip loop may skip the only write of a buffer read after it.
    let skipped = DOUBLING.replace("trips 10", "trips 0").replace(
        "kernel finish [3] {\n    %0 = load buf2",
        "kernel finish [3] {\n    %0 = load buf3",
    );
    let found = kinds(&skipped);
    assert_eq!(
        found,
        [(
            VerifyLocation::Value {
                kernel: 3,
                value: mir::MirValue::new(0)
            },
            VerifyErrorKind::ReadBeforeWrite(BufId::new(3))
        )]
    );
    // With one trip the same read is fine.
    verified(&skipped.replace("trips 0", "trips 1"));
}

#[test]
fn serialized_programs_without_loops_still_read() {
    let program = verified(DOUBLING);
    let mut value = serde_json::to_value(&program).unwrap();
    let back: MirProgram = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back, program);
    value.as_object_mut().unwrap().remove("loops");
    let without: MirProgram = serde_json::from_value(value).unwrap();
    assert!(without.loops().is_empty());
    assert_eq!(without.kernels(), program.kernels());
}
