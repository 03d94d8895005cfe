//! Lowering MIR programs with loops: the loops carry over to the LIR kernels (mapped where a
//! MIR kernel becomes several), the memory plan keeps every buffer touched inside a loop live
//! over the whole range, and the LIR interpreter gives the MIR interpreter's bits.

#![allow(clippy::unwrap_used)]

use rfx_ir::interp::{Mode, run_lir, run_mir};
use rfx_ir::lir::{LirBuffer, LirProgram, Storage};
use rfx_ir::mir::{self, MirProgram};
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{Array, ArrayView, BufId};
use rfx_lower::{
    InterpBackend, Interval, LowerConfig, execute_lowered, live_across_loops, lower, plan_memory,
};

/// Two carries updated by separate kernels: `c = c + 1` (dead after the loop) and `d = 2d`.
/// Without the loop rule, `c` (written before the loop, last read by `step_c`) would share
/// bytes with `nd` (written by `step_d`, read by `back_d`), and `back_c` would overwrite `nd`
/// between its write and its read.
const TWO_CARRIES: &str = "\
mir two_carries {
  buf0: f64[3] = input x
  buf1: f64[3] = output y
  buf2: f64[3] = temp
  buf3: f64[3] = temp
  buf4: f64[3] = temp
  buf5: f64[3] = temp
  kernel init [3] {
    %0 = load buf0 [1] : f64
    store buf2 = %0
    store buf3 = %0
  }
  kernel step_c [3] {
    %0 = load buf2 [1] : f64
    %1 = const 1.0 : f64
    %2 = add %0, %1 : f64
    store buf4 = %2
  }
  kernel step_d [3] {
    %0 = load buf3 [1] : f64
    %1 = const 2.0 : f64
    %2 = mul %0, %1 : f64
    store buf5 = %2
  }
  kernel back_c [3] {
    %0 = load buf4 [1] : f64
    store buf2 = %0
  }
  kernel back_d [3] {
    %0 = load buf5 [1] : f64
    store buf3 = %0
  }
  kernel finish [3] {
    %0 = load buf3 [1] : f64
    store buf1 = %0
  }
  loop kernels 1..5 trips 5
}
";

/// MIR kernels with reductions over two axis sets, each lowered to two LIR kernels, before
/// and inside an outer loop holding an inner while loop with an exit flag.
const SPLIT: &str = "\
mir split {
  buf0: f64[2,3] = input m
  buf1: f64[2] = output y
  buf2: f64[3] = output z
  buf3: f64[2] = temp
  buf4: f64[3] = temp
  buf5: f64[2] = temp
  buf6: f64[3] = temp
  buf7: f64[2] = temp
  buf8: f64[3] = temp
  buf9: f64[] = temp
  buf10: f64[] = temp
  buf11: bool[] = temp
  kernel stats [2,3] {
    %0 = load buf0 [3,1] : f64
    reduce sum buf3 = %0 axes [1]
    reduce max buf4 = %0 axes [0]
  }
  kernel init_a [2] {
    %0 = load buf3 [1] : f64
    store buf5 = %0
  }
  kernel init_b [3] {
    %0 = load buf4 [1] : f64
    store buf6 = %0
  }
  kernel outer [2,3] {
    %0 = load buf5 [1,0] : f64
    %1 = load buf6 [0,1] : f64
    %2 = mul %0, %1 : f64
    %3 = const 0.25 : f64
    %4 = mul %2, %3 : f64
    reduce sum buf7 = %4 axes [1]
    reduce max buf8 = %4 axes [0]
  }
  kernel back_a [2] {
    %0 = load buf7 [1] : f64
    store buf5 = %0
  }
  kernel back_b [3] {
    %0 = load buf8 [1] : f64
    store buf6 = %0
  }
  kernel halve_init [] {
    %0 = load buf5 [] : f64
    store buf9 = %0
  }
  kernel halve [] {
    %0 = load buf9 [] : f64
    %1 = const 0.5 : f64
    %2 = mul %0, %1 : f64
    %3 = const 3.0 : f64
    %4 = gt %2, %3 : bool
    store buf10 = %2
    store buf11 = %4
  }
  kernel halve_back [] {
    %0 = load buf10 [] : f64
    store buf9 = %0
  }
  kernel scale_a [2] {
    %0 = load buf5 [1] : f64
    %1 = load buf9 [0] : f64
    %2 = div %0, %1 : f64
    store buf7 = %2
  }
  kernel rescale_back [2] {
    %0 = load buf7 [1] : f64
    store buf5 = %0
  }
  kernel fin_y [2] {
    %0 = load buf5 [1] : f64
    store buf1 = %0
  }
  kernel fin_z [3] {
    %0 = load buf6 [1] : f64
    store buf2 = %0
  }
  loop kernels 3..11 trips 3
  loop kernels 7..9 trips 20 exit buf11
}
";

fn mir_program(text: &str) -> MirProgram {
    let program = mir::parse(text).unwrap();
    mir::verify(&program).unwrap_or_else(|e| panic!("{e}"));
    program
}

fn lowered(program: &MirProgram) -> LirProgram {
    let (lir, _) = lower(program, &LowerConfig::default()).unwrap();
    assert_eq!(
        rfx_ir::lir::parse(&lir.to_string()).unwrap(),
        lir,
        "LIR text round-trips"
    );
    lir
}

fn bits(arrays: &[Array]) -> Vec<Vec<u64>> {
    arrays
        .iter()
        .map(|a| a.to_f64_vec().iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// The MIR and LIR interpreters' results, which must agree bit for bit in both modes.
fn both(program: &MirProgram, inputs: &[ArrayView<'_>]) -> Vec<Array> {
    let lir = lowered(program);
    for mode in [Mode::Native, Mode::Oracle] {
        let expected = run_mir(program, inputs, mode).unwrap();
        let found = run_lir(&lir, inputs, mode).unwrap();
        assert_eq!(bits(&found), bits(&expected), "{mode:?}");
    }
    run_lir(&lir, inputs, Mode::Native).unwrap()
}

#[test]
fn a_carry_is_live_over_the_whole_loop() {
    let program = mir_program(TWO_CARRIES);
    let lir = lowered(&program);
    assert_eq!(
        lir.loops(),
        [KernelLoop {
            first: 1,
            end: 5,
            trips: 5,
            exit: None
        }]
    );
    let offset = |b: usize| match lir.buffer(BufId::new(b)).unwrap().storage {
        Storage::Arena { offset } => offset,
        ref other => panic!("{other:?}"),
    };
    // Each temp is live across the loop, so all four get their own bytes.
    let mut offsets: Vec<usize> = (2..6).map(offset).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), 4, "{lir}");

    let x = Array::from_slice(&[1.0f64, -0.5, 3.0]);
    let y = both(&program, &[x.view()]);
    assert_eq!(y[0].as_slice::<f64>().unwrap(), [32.0, -16.0, 96.0]);

    // The plan without the loop rule puts `c` (buf2) and `nd` (buf5) at one offset, and that
    // program computes something else: `back_c` overwrites `nd` before `back_d` reads it.
    let intervals = [(2, 0, 1), (3, 0, 5), (4, 1, 3), (5, 2, 4)].map(|(b, start, end)| Interval {
        buf: BufId::new(b),
        bytes: 24,
        start,
        end,
    });
    let plan = plan_memory(&intervals, 64);
    assert_eq!(
        plan.offsets[0], plan.offsets[3],
        "without the rule, c and nd share bytes"
    );
    let widened = live_across_loops(intervals[0], &[0, 1, 3], lir.loops());
    assert_eq!((widened.start, widened.end), (0, 4));
    let mut buffers: Vec<LirBuffer> = lir.buffers().to_vec();
    for (interval, offset) in intervals.iter().zip(&plan.offsets) {
        buffers[interval.buf.index()].storage = Storage::Arena { offset: *offset };
    }
    let shared = LirProgram::from_parts("shared", buffers, plan.arena_bytes, 64, lir.kernels().to_vec())
        .with_loops(lir.loops().to_vec());
    let wrong = run_lir(&shared, &[x.view()], Mode::Native).unwrap();
    assert_ne!(
        wrong[0].as_slice::<f64>().unwrap(),
        y[0].as_slice::<f64>().unwrap()
    );
}

#[test]
fn loops_are_mapped_onto_the_kernels_lowering_splits() {
    let program = mir_program(SPLIT);
    let lir = lowered(&program);
    // `stats` and `outer` each become two LIR kernels.
    let names: Vec<&str> = lir.kernels().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "stats",
            "stats_1",
            "init_a",
            "init_b",
            "outer",
            "outer_1",
            "back_a",
            "back_b",
            "halve_init",
            "halve",
            "halve_back",
            "scale_a",
            "rescale_back",
            "fin_y",
            "fin_z"
        ]
    );
    assert_eq!(
        lir.loops(),
        [
            KernelLoop {
                first: 4,
                end: 13,
                trips: 3,
                exit: None
            },
            KernelLoop {
                first: 9,
                end: 11,
                trips: 20,
                exit: Some(BufId::new(11))
            }
        ]
    );
    let m = Array::from_vec([2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let out = both(&program, &[m.view()]);
    // The closed form, iteration by iteration: a' = a (sum b) / 4 and b' = b max(a) / 4 (a and
    // b are positive), then a is divided by h, the first halving of a[0] that is at most 3.
    let (mut a, mut b) = ([6.0f64, 15.0], [4.0f64, 5.0, 6.0]);
    for _ in 0..3 {
        let (sum_b, max_a) = (b.iter().sum::<f64>(), a[0].max(a[1]));
        a = a.map(|v| v * sum_b * 0.25);
        b = b.map(|v| v * max_a * 0.25);
        let mut h = a[0];
        loop {
            h *= 0.5;
            if h <= 3.0 {
                break;
            }
        }
        a = a.map(|v| v / h);
    }
    assert_eq!(out[0].as_slice::<f64>().unwrap(), a);
    assert_eq!(out[1].as_slice::<f64>().unwrap(), b);
}

#[test]
fn the_interp_backend_runs_loops() {
    let program = mir_program(TWO_CARRIES);
    let lir = lowered(&program);
    let x = Array::from_slice(&[0.25f64, 2.0, -1.0]);
    let out = execute_lowered(&lir, &[("x", x.view())], &InterpBackend).unwrap();
    assert_eq!(out[0].0, "y");
    assert_eq!(out[0].1.as_slice::<f64>().unwrap(), [8.0, 64.0, -32.0]);
    // Zero trips: the initial carry comes out.
    let zero = mir_program(&TWO_CARRIES.replace("trips 5", "trips 0"));
    let out = execute_lowered(&lowered(&zero), &[("x", x.view())], &InterpBackend).unwrap();
    assert_eq!(out[0].1.as_slice::<f64>().unwrap(), [0.25, 2.0, -1.0]);
}

/// Random MIR programs with loops, nested up to two deep, built the way the optimiser builds
/// them: copy kernels into carry temps before a loop, a body of elementwise kernels reading the
/// carries and earlier values, fresh temps for the new carries, sometimes an exit flag, and
/// copy kernels back into the carries ending the range.
struct RandomProgram {
    rng: rfx_ir::testgen::TestRng,
    n: usize,
    buffers: Vec<String>,
    kernels: Vec<String>,
    loops: Vec<String>,
}

impl RandomProgram {
    fn temp(&mut self, ty: &str) -> usize {
        self.buffers.push(format!("{ty} = temp"));
        self.buffers.len() - 1
    }

    fn copy(&mut self, dst: usize, src: usize) {
        let n = self.n;
        self.kernels.push(format!(
            "kernel copy [{n}] {{\n    %0 = load buf{src} [1] : f64\n    store buf{dst} = %0\n  }}"
        ));
    }

    /// A kernel `t = c * a + b` (or `sin` of it) of two available values; returns `t`.
    fn compute(&mut self, available: &[usize]) -> usize {
        let a = *self.rng.pick(available).unwrap();
        let b = *self.rng.pick(available).unwrap();
        let c = *self.rng.pick(&["0.5", "-0.75", "1.25", "0.125"]).unwrap();
        let t = self.temp(&format!("f64[{}]", self.n));
        let (result, sin) = if self.rng.chance(0.3) {
            ("%5", "\n    %5 = sin %4 : f64")
        } else {
            ("%4", "")
        };
        self.kernels.push(format!(
            "kernel step [{}] {{\n    %0 = load buf{a} [1] : f64\n    %1 = load buf{b} [1] : f64\n    %2 = const {c} : f64\n    %3 = mul %0, %2 : f64\n    %4 = add %3, %1 : f64{sin}\n    store buf{t} = {result}\n  }}",
            self.n
        ));
        t
    }

    fn block(&mut self, depth: usize, available: &mut Vec<usize>) {
        for _ in 0..1 + self.rng.below(3) {
            if depth < 2 && self.rng.chance(0.45) {
                self.repeat(depth, available);
            } else {
                let t = self.compute(available);
                available.push(t);
            }
        }
    }

    fn repeat(&mut self, depth: usize, available: &mut Vec<usize>) {
        let carries: Vec<usize> = (0..1 + self.rng.below(2))
            .map(|_| {
                let src = *self.rng.pick(available).unwrap();
                let c = self.temp(&format!("f64[{}]", self.n));
                self.copy(c, src);
                c
            })
            .collect();
        let index = self.loops.len();
        self.loops.push(String::new());
        let first = self.kernels.len();
        let mut inner = available.clone();
        inner.extend(&carries);
        self.block(depth + 1, &mut inner);
        let news: Vec<usize> = carries.iter().map(|_| self.compute(&inner)).collect();
        let exit = if self.rng.chance(0.4) {
            let flag = self.temp("bool[]");
            let limit = self.rng.uniform(-2.0, 2.0);
            self.kernels.push(format!(
                "kernel flag [] {{\n    %0 = load buf{} [] : f64\n    %1 = const {limit:?} : f64\n    %2 = lt %0, %1 : bool\n    store buf{flag} = %2\n  }}",
                news[0]
            ));
            format!(" exit buf{flag}")
        } else {
            String::new()
        };
        for (&c, &new) in carries.iter().zip(&news) {
            self.copy(c, new);
        }
        let (end, trips) = (self.kernels.len(), self.rng.below(4));
        self.loops[index] = format!("loop kernels {first}..{end} trips {trips}{exit}");
        available.extend(carries);
    }

    fn generate(seed: u64) -> String {
        let mut rng = rfx_ir::testgen::TestRng::new(seed);
        let n = 1 + rng.below(4);
        let mut p = RandomProgram {
            rng,
            n,
            buffers: vec![format!("f64[{n}] = input x0"), format!("f64[{n}] = input x1")],
            kernels: Vec::new(),
            loops: Vec::new(),
        };
        let mut available = vec![0, 1];
        p.block(0, &mut available);
        for k in 0..1 + p.rng.below(2) {
            let src = *p.rng.pick(&available).unwrap();
            p.buffers.push(format!("f64[{n}] = output y{k}"));
            let dst = p.buffers.len() - 1;
            p.copy(dst, src);
        }
        let mut text = format!("mir random{seed} {{\n");
        for (i, decl) in p.buffers.iter().enumerate() {
            text += &format!("  buf{i}: {decl}\n");
        }
        for kernel in &p.kernels {
            text += &format!("  {kernel}\n");
        }
        for line in &p.loops {
            text += &format!("  {line}\n");
        }
        text + "}\n"
    }
}

#[test]
fn random_programs_with_loops_lower_to_the_same_bits() {
    let mut looped = 0;
    for seed in 0..300 {
        let text = RandomProgram::generate(seed);
        let program = mir::parse(&text).unwrap();
        mir::verify(&program).unwrap_or_else(|e| panic!("seed {seed}:\n{e}"));
        looped += usize::from(!program.loops().is_empty());
        let mut rng = rfx_ir::testgen::TestRng::new(seed + 1000);
        let n = program.inputs().next().unwrap().2.shape.numel();
        let inputs: Vec<Array> = (0..2)
            .map(|_| Array::from_slice(&(0..n).map(|_| rng.uniform(-2.0, 2.0)).collect::<Vec<f64>>()))
            .collect();
        let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
        let (lir, _) =
            lower(&program, &LowerConfig::default()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(lir.loops().len(), program.loops().len());
        for mode in [Mode::Native, Mode::Oracle] {
            let expected = run_mir(&program, &views, mode).unwrap();
            let found = run_lir(&lir, &views, mode).unwrap();
            assert_eq!(
                bits(&found),
                bits(&expected),
                "seed {seed}, {mode:?}:\n{text}\n{lir}"
            );
        }
    }
    assert!(looped > 150, "only {looped} of 300 programs have loops");
}

#[test]
fn random_loop_kernels_optimised_and_lowered_give_the_hir_interpreters_bits() {
    use rfx_ir::interp::run_hir;
    use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel, same_values};
    use rfx_opt::{OptConfig, optimize};

    // One lane per reduction: the HIR interpreter's order, so the bits must agree.
    let config = LowerConfig {
        reduce_lanes: Some(1),
        ..LowerConfig::default()
    };
    let mut rng = TestRng::new(0x1005_b001);
    let mut looped = 0;
    for i in 0..120 {
        let kernel = random_loop_kernel(&mut rng, &LoopGenConfig::default(), &format!("loops{i}"));
        let (mir, _) = optimize(&kernel, &OptConfig::exact()).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
        let (lir, _) = lower(&mir, &config).unwrap_or_else(|e| panic!("{e}\n{mir}"));
        looped += usize::from(!lir.loops().is_empty());
        let inputs = random_inputs(&mut rng, &kernel, 0.1);
        let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).unwrap();
        let found = run_lir(&lir, &views, Mode::Native).unwrap();
        for (e, f) in expected.iter().zip(&found) {
            assert!(same_values(e, f), "HIR {e:?}, LIR {f:?}\n{kernel}\n{mir}\n{lir}");
        }
    }
    assert!(looped >= 90, "only {looped} of 120 lowered programs loop");
}
