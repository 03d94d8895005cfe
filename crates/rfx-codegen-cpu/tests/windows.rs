//! Windowed loads (`load ... offset`) and clamping gathers on the CPU backend, from LIR text:
//! vector bodies, scalar tails and the preamble, in every dtype, with indices far outside the
//! buffer on both sides (`i32::MIN`, `i32::MAX`). Hand-computed expectations, and the LIR
//! interpreter on the same program.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, Scratch};

/// `gathered[i] = x[clamp(idx[i], 0, 4)]` over 9 points (two vectors and a tail);
/// `window[i] = x[2 + i]` over 3 points; `fixed = x[clamp(7)]` read in the preamble and
/// broadcast over 9 points.
fn program(dtype: &str) -> String {
    format!(
        "\
lir windows arena 0 align 64 {{
  buf0: {dtype}[5] = input x
  buf1: i32[9] = input idx
  buf2: {dtype}[9] = output gathered
  buf3: {dtype}[3] = output window
  buf4: {dtype}[9] = output fixed
  kernel k0 dims [9] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {{
    slots [i32, {dtype}, i32, {dtype}]
    preamble {{
      s2 = const 7
      s3 = gather buf0 s2
    }}
    body {{
      s0 = load buf1 [1]
      s1 = gather buf0 s0
      store buf2 [1] = s1
      store buf4 [1] = s3
    }}
  }}
  kernel k1 dims [3] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {{
    slots [{dtype}]
    preamble {{
    }}
    body {{
      s0 = load buf0 [1] offset 2
      store buf3 [1] = s0
    }}
  }}
}}
"
    )
}

const INDICES: [i32; 9] = [-5, 0, 1, 4, 5, 100, i32::MIN, i32::MAX, 2];

#[test]
fn gathers_clamp_and_windows_start_at_their_offset_in_every_dtype() {
    for dtype in DType::ALL {
        let text = program(&dtype.to_string());
        let program = lir::parse(&text).unwrap_or_else(|e| panic!("{dtype}: {e}\n{text}"));
        lir::verify(&program).unwrap_or_else(|e| panic!("{dtype}: {e}"));
        let values: Vec<Scalar> = [1.5, -2.25, 3.0, -0.0, 7.75]
            .iter()
            .enumerate()
            .map(|(i, &v)| match dtype {
                DType::Bool => Scalar::Bool(i % 2 == 1),
                DType::I32 => Scalar::I32(10 * i as i32 - 17),
                _ => Scalar::from_f64(dtype, v),
            })
            .collect();
        let x = Array::new([5], ArrayData::from_scalars(dtype, values.clone()).expect("x")).expect("x");
        let idx = Array::new(
            [9],
            ArrayData::from_scalars(DType::I32, INDICES.iter().map(|&i| Scalar::I32(i))).expect("idx"),
        )
        .expect("idx");
        let inputs = [x.view(), idx.view()];
        let compiled = CpuBackend
            .compile(&program, &Default::default())
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        let mut outputs: Vec<Array> = program
            .outputs()
            .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
            .collect();
        {
            let mut views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
            compiled
                .run(&inputs, &mut views, &mut Scratch::new())
                .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        }
        let clamp = |i: i32| values[i.clamp(0, 4) as usize];
        let gathered: Vec<Scalar> = INDICES.iter().map(|&i| clamp(i)).collect();
        let window: Vec<Scalar> = values[2..5].to_vec();
        let fixed = vec![values[4]; 9];
        let reference = run_lir(&program, &inputs, Mode::Native).expect("interpreter");
        for (k, want) in [gathered, window, fixed].iter().enumerate() {
            let got: Vec<Scalar> = (0..want.len()).filter_map(|i| outputs[k].get(i)).collect();
            let interp: Vec<Scalar> = (0..want.len()).filter_map(|i| reference[k].get(i)).collect();
            let bits = |v: &[Scalar]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(want), "{dtype} output {k}: {got:?}");
            assert_eq!(
                bits(&interp),
                bits(want),
                "{dtype} output {k} (interpreter): {interp:?}"
            );
        }
    }
}
