//! The real-time path, `Compiled::run_args` on arguments made once (`CallArgs`): it must give
//! exactly what the checked `Compiled::run` gives, on direct tables and on programs with
//! temporaries, and arguments made for another program must go through the checks.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayViewMut, hir};
use rfx_lower::{Backend, BackendError, CallArgs, CallError, Compiled, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn compile(text: &str) -> (hir::Kernel, std::sync::Arc<dyn Compiled>) {
    let kernel = hir::parse(text).expect("kernel");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let (lir, _) = lower(&mir, &LowerConfig::default()).expect("lower");
    let compiled = CpuBackend.compile(&lir, &Default::default()).expect("compile");
    (kernel, compiled)
}

/// Outputs of the checked path on `inputs`.
fn checked(compiled: &dyn Compiled, inputs: &[Array]) -> Vec<Array> {
    let mut outputs: Vec<Array> = compiled
        .program()
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outs: Vec<ArrayViewMut<'_>> = outputs.iter_mut().map(Array::view_mut).collect();
    compiled
        .run(&views, &mut outs, &mut Scratch::new())
        .expect("checked run");
    drop(outs);
    outputs
}

/// Every element's bits (NaNs compare equal to themselves), with the shape and dtype.
fn bits(array: &Array) -> (rfx_ir::Shape, rfx_ir::DType, Vec<u64>) {
    let values = array.to_f64_vec().into_iter().map(f64::to_bits).collect();
    (array.shape().clone(), array.dtype(), values)
}

/// Runs `text` on fresh random inputs through `run_args` (several steps, inputs rewritten in
/// place each time) and compares every step with the checked path and the interpreter.
fn agrees(text: &str, seed: u64) {
    let (kernel, compiled) = compile(text);
    let mut args = CallArgs::new(compiled.as_ref());
    assert_eq!(
        args.id(),
        compiled.args_id().expect("the CPU backend has a fast path")
    );
    let mut scratch = Scratch::new();
    let mut rng = TestRng::new(seed);
    for step in 0..4 {
        let inputs = random_inputs(&mut rng, &kernel, 0.1);
        for (k, input) in inputs.iter().enumerate() {
            args.set_input(k, input.view()).expect("set_input");
        }
        compiled.run_args(&mut args, &mut scratch).expect("run_args");
        let expected = checked(compiled.as_ref(), &inputs);
        let got: Vec<_> = args.outputs().map(|v| bits(&v.to_owned())).collect();
        let want: Vec<_> = expected.iter().map(bits).collect();
        assert_eq!(got, want, "step {step} of\n{text}");
    }
}

#[test]
fn a_pid_step_matches_the_checked_call_and_a_hand_computed_value() {
    let text = "kernel pid {
      %e = input e : f32[1]
      %i = input i : f32[1]
      %d = input d : f32[1]
      %kp = const 1.2 : f32[]
      %ki = const 0.3 : f32[]
      %kd = const 0.05 : f32[]
      %lo = const -1.0 : f32[]
      %hi = const 1.0 : f32[]
      %a = mul %kp, %e : f32[1]
      %b = mul %ki, %i : f32[1]
      %c = mul %kd, %d : f32[1]
      %s = add %a, %b : f32[1]
      %t = add %s, %c : f32[1]
      %u = clamp %t, %lo, %hi : f32[1]
      output u = %u
    }";
    agrees(text, 11);
    let (_, compiled) = compile(text);
    let mut args = CallArgs::new(compiled.as_ref());
    let mut scratch = Scratch::new();
    for (e, i, d) in [(0.3f32, 0.1f32, -0.2f32), (2.0, 1.0, 0.0), (-0.7, -3.0, 4.0)] {
        args.input_mut::<f32>(0).expect("e")[0] = e;
        args.input_mut::<f32>(1).expect("i")[0] = i;
        args.input_mut::<f32>(2).expect("d")[0] = d;
        compiled.run_args(&mut args, &mut scratch).expect("run_args");
        let want = ((1.2f32 * e + 0.3 * i) + 0.05 * d).clamp(-1.0, 1.0);
        assert_eq!(args.output::<f32>(0), Some(&[want][..]));
    }
}

#[test]
fn programs_with_temporaries_and_several_outputs_match() {
    // A reduction feeding an elementwise kernel: the table lives in the scratch, after the
    // arena, so `run_args` takes the planned (not the direct) path.
    agrees(
        "kernel k {
          %x = input x : f32[4, 33]
          %y = input y : f32[33]
          %s = sum %x axes [1] : f32[4]
          %m = max %x axes [0] : f32[33]
          %z = add %m, %y : f32[33]
          %b = gt %z, %y : bool[33]
          output s = %s
          output z = %z
          output b = %b
        }",
        12,
    );
    // Integers, broadcasting and a scalar output.
    agrees(
        "kernel k {
          %a = input a : i32[3, 5]
          %b = input b : i32[5]
          %c = add %a, %b : i32[3, 5]
          %t = sum %c axes [0, 1] : i32[]
          output c = %c
          output t = %t
        }",
        13,
    );
    // Long enough for tiles and a transcendental routine.
    agrees(
        "kernel k {
          %x = input x : f32[1000]
          %y = input y : f32[1000]
          %c = const 2.0 : f32[]
          %m = mul %x, %c : f32[1000]
          %s = sin %m : f32[1000]
          %o = add %s, %y : f32[1000]
          output o = %o
        }",
        14,
    );
}

#[test]
fn arguments_made_for_another_program_are_checked() {
    let (_, small) = compile("kernel k {\n %x = input x : f32[3]\n %y = neg %x : f32[3]\n output y = %y\n}");
    let (_, other) = compile("kernel k {\n %x = input x : f32[3]\n %y = abs %x : f32[3]\n output y = %y\n}");
    let (_, wide) = compile("kernel k {\n %x = input x : f32[4]\n %y = neg %x : f32[4]\n output y = %y\n}");
    let mut args = CallArgs::new(small.as_ref());
    args.input_mut::<f32>(0)
        .expect("x")
        .copy_from_slice(&[-1.5, 0.25, 3.0]);
    let mut scratch = Scratch::new();
    // The same signature: the checks pass and the other program runs.
    other.run_args(&mut args, &mut scratch).expect("same signature");
    assert_eq!(args.output::<f32>(0), Some(&[1.5f32, 0.25, 3.0][..]));
    // Another shape: a typed error, and the outputs are untouched.
    match wide.run_args(&mut args, &mut scratch) {
        Err(BackendError::Call(CallError::Shape { name, .. })) => assert_eq!(name, "x"),
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert_eq!(args.output::<f32>(0), Some(&[1.5f32, 0.25, 3.0][..]));
    // Two compilations of one program never share an identity.
    assert_ne!(small.args_id(), other.args_id());
}

#[test]
fn accessors_check_index_and_dtype() {
    let (_, compiled) = compile(
        "kernel k {\n %x = input x : f32[2]\n %n = input n : i32[2]\n %y = neg %x : f32[2]\n output y = %y\n}",
    );
    let mut args = CallArgs::new(compiled.as_ref());
    assert!(args.input_mut::<f64>(0).is_none(), "x is f32");
    assert!(args.input_mut::<i32>(1).is_some());
    assert!(args.input_mut::<f32>(2).is_none(), "two inputs");
    assert!(args.output::<f32>(1).is_none(), "one output");
    assert_eq!(args.inputs().count(), 2);
    assert_eq!(
        args.set_input(2, Array::from_slice(&[1.0f32, 2.0]).view()),
        Err(CallError::Arity {
            what: "inputs",
            expected: 2,
            found: 3
        })
    );
    assert!(matches!(
        args.set_input(0, Array::from_slice(&[1i32, 2]).view()),
        Err(CallError::DType { .. })
    ));
    assert!(matches!(
        args.set_input(0, Array::from_slice(&[1.0f32, 2.0, 3.0]).view()),
        Err(CallError::Shape { .. })
    ));
    args.set_input(0, Array::from_slice(&[1.0f32, -2.0]).view())
        .expect("fits");
    compiled.run_args(&mut args, &mut Scratch::new()).expect("run");
    assert_eq!(args.output::<f32>(0), Some(&[-1.0f32, 2.0][..]));
}

/// The checked call (`Compiled::run`) refuses, with the typed error naming the argument and
/// without writing anything, every call that does not fit: three inputs and one output, and
/// one input and two outputs (a reduction beside an elementwise result).
#[test]
fn the_checked_call_refuses_calls_that_do_not_fit() {
    use rfx_ir::{ArrayView, Shape};
    let (_, pid) = compile(
        "kernel k {\n %e = input e : f32[4]\n %i = input i : f32[4]\n %d = input d : f32[4]\n %s = add %e, %i : f32[4]\n %t = mul %s, %d : f32[4]\n output t = %t\n}",
    );
    let (_, two) = compile(
        "kernel k {\n %x = input x : f32[2, 3]\n %s = sum %x axes [1] : f32[2]\n %n = neg %x : f32[2, 3]\n output s = %s\n output n = %n\n}",
    );
    let (four, six, two_shape) = (Shape::new([4]), Shape::new([2, 3]), Shape::new([2]));
    let (a, b, c) = ([1.0f32, 2.0, 3.0, 4.0], [0.5f32; 4], [2.0f32; 4]);
    let ints = [1i32; 4];
    let mut scratch = Scratch::new();
    let call = |compiled: &dyn Compiled, inputs: &[ArrayView<'_>], outputs: &mut [ArrayViewMut<'_>]| {
        compiled.run(inputs, outputs, &mut Scratch::new())
    };
    let (va, vb, vc) = (
        ArrayView::new(&four, &a).expect("a"),
        ArrayView::new(&four, &b).expect("b"),
        ArrayView::new(&four, &c).expect("c"),
    );
    let vi = ArrayView::new(&four, &ints).expect("ints");
    let mut out = [7.0f32; 4];
    let mut spare = [7.0f32; 4];
    let mut wrong_shape = [7.0f32; 6];
    let expect = |result: Result<(), BackendError>, want: CallError| match result {
        Err(BackendError::Call(e)) => assert_eq!(e, want),
        other => panic!("expected {want:?}, got {other:?}"),
    };
    // A wrong dtype, named.
    expect(
        call(
            pid.as_ref(),
            &[va, vi, vc],
            &mut [ArrayViewMut::new(&four, &mut out).expect("t")],
        ),
        CallError::DType {
            name: "i".into(),
            expected: rfx_ir::DType::F32,
            found: rfx_ir::DType::I32,
        },
    );
    // A wrong output shape, named.
    expect(
        call(
            pid.as_ref(),
            &[va, vb, vc],
            &mut [ArrayViewMut::new(&six, &mut wrong_shape).expect("t")],
        ),
        CallError::Shape {
            name: "t".into(),
            expected: four.clone(),
            found: six.clone(),
        },
    );
    // Too few inputs, and the right total split as two inputs and two outputs.
    expect(
        call(
            pid.as_ref(),
            &[va, vb],
            &mut [ArrayViewMut::new(&four, &mut out).expect("t")],
        ),
        CallError::Arity {
            what: "inputs",
            expected: 3,
            found: 2,
        },
    );
    expect(
        call(
            pid.as_ref(),
            &[va, vb],
            &mut [
                ArrayViewMut::new(&four, &mut out).expect("t"),
                ArrayViewMut::new(&four, &mut spare).expect("spare"),
            ],
        ),
        CallError::Arity {
            what: "inputs",
            expected: 3,
            found: 2,
        },
    );
    assert_eq!(
        (out, spare, wrong_shape),
        ([7.0; 4], [7.0; 4], [7.0; 6]),
        "nothing written"
    );
    // An output over an input: the same memory seen both ways (only through raw views, which
    // safe code cannot make; the check must still refuse it).
    let mut shared = [1.0f32, 2.0, 3.0, 4.0];
    let base = shared.as_mut_ptr();
    // SAFETY: both views cover `shared`, which outlives them; the call is refused before any
    // element is read or written, and nothing else touches `shared` meanwhile.
    let (as_input, as_output) = unsafe {
        (
            ArrayView::new(&four, std::slice::from_raw_parts(base, 4)).expect("in"),
            ArrayViewMut::new(&four, std::slice::from_raw_parts_mut(base, 4)).expect("out"),
        )
    };
    expect(
        call(pid.as_ref(), &[va, as_input, vc], &mut [as_output]),
        CallError::Alias {
            output: "t".into(),
            other: "i".into(),
        },
    );
    assert_eq!(shared, [1.0, 2.0, 3.0, 4.0]);
    // Two outputs over each other.
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let vx = ArrayView::new(&six, &x).expect("x");
    let mut both = [9.0f32; 6];
    let base = both.as_mut_ptr();
    // SAFETY: both views lie inside `both`, which outlives them; the call is refused before
    // any element is written.
    let (s, n) = unsafe {
        (
            ArrayViewMut::new(&two_shape, std::slice::from_raw_parts_mut(base.add(4), 2)).expect("s"),
            ArrayViewMut::new(&six, std::slice::from_raw_parts_mut(base, 6)).expect("n"),
        )
    };
    expect(
        call(two.as_ref(), &[vx], &mut [s, n]),
        CallError::Alias {
            output: "s".into(),
            other: "n".into(),
        },
    );
    assert_eq!(both, [9.0; 6]);
    // The same calls, fitting, run and write.
    let mut t = [0.0f32; 4];
    pid.run(
        &[va, vb, vc],
        &mut [ArrayViewMut::new(&four, &mut t).expect("t")],
        &mut scratch,
    )
    .expect("fits");
    assert_eq!(t, [3.0, 5.0, 7.0, 9.0]);
    let (mut s, mut n) = ([0.0f32; 2], [0.0f32; 6]);
    two.run(
        &[vx],
        &mut [
            ArrayViewMut::new(&two_shape, &mut s).expect("s"),
            ArrayViewMut::new(&six, &mut n).expect("n"),
        ],
        &mut scratch,
    )
    .expect("fits");
    assert_eq!((s, n), ([6.0, 15.0], [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]));
}
