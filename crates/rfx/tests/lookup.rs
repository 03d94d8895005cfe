//! Table lookups of traced tensors end to end: gain scheduling by linear interpolation in a
//! table, rows of a table picked by an index (`take`, `take_along_axis`), against
//! hand-computed values; their gradients against closed forms and a hand-written scatter-add;
//! a batched map; and the typed errors of bad lookups.

use crate::common;
#[path = "../examples/gain_schedule/mod.rs"]
mod gain_schedule;

use common::{f64s, type_error};
use gain_schedule::schedule;
use rfx::{All, Array, DType, Tensor, TensorType};
use rfx_ir::TypeError;

fn f32s(a: &Array) -> &[f32] {
    a.as_slice::<f32>().expect("an f32 array")
}

#[test]
fn a_scheduled_gain_interpolates_its_table_in_one_loop() {
    let f = rfx::jit(schedule);
    let table: Vec<f32> = (0..16).map(|k| 1.0 + (k as f32 * 0.7).sin()).collect();
    let v: Vec<f32> = (0..37).map(|k| -0.5 + k as f32 * 0.19).collect();
    let out = f.call((&v[..], &table[..])).expect("call");
    for (k, (&got, &v)) in f32s(&out[0]).iter().zip(&v).enumerate() {
        let pos = (v * 2.5).clamp(0.0, 14.999);
        let i = pos.floor();
        let (lo, hi) = (table[i as usize], table[i as usize + 1]);
        let want = lo + (pos - i) * (hi - lo);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "speed {k} ({v}): {got} against {want}"
        );
    }
    let types = [
        TensorType::new(DType::F32, [37]),
        TensorType::new(DType::F32, [16]),
    ];
    assert_eq!(f.executable(&types).expect("compile").mir().kernels().len(), 1);

    // ∂gain/∂v is the segment's slope times the scale (inside the table, away from the knots);
    // ∂(Σ gain)/∂table adds 1 - t to each speed's lower entry and t to its upper one.
    let g = rfx::jit(rfx::grad(|v: Tensor, table: Tensor| schedule(v, table).sum(All)).wrt(&[0, 1]));
    let v: Vec<f64> = (0..20).map(|k| 0.05 + k as f64 * 0.29).collect();
    let table: Vec<f64> = (0..16).map(|k| 1.0 + (k as f64 * 0.7).sin()).collect();
    let out = g.call((&v[..], &table[..])).expect("grad");
    let mut want_table = [0.0f64; 16];
    for (k, (&got, &v)) in f64s(&out[0]).iter().zip(&v).enumerate() {
        let pos = v * 2.5;
        let i = pos.floor() as usize;
        let slope = 2.5 * (table[i + 1] - table[i]);
        assert!((got - slope).abs() < 1e-12, "speed {k}: {got} against {slope}");
        want_table[i] += 1.0 - (pos - pos.floor());
        want_table[i + 1] += pos - pos.floor();
    }
    for (k, (&got, want)) in f64s(&out[1]).iter().zip(want_table).enumerate() {
        assert!((got - want).abs() < 1e-12, "entry {k}: {got} against {want}");
    }
}

#[test]
fn take_picks_rows_and_take_along_axis_picks_per_element() {
    // A [4, 3] table of waypoints; rows by an i32 index of any shape (clamped), one row by a
    // scalar index, and one column per row along axis 1.
    let table: Vec<f64> = (0..12).map(|k| k as f64 * 1.5 - 4.0).collect();
    let table = Array::from_vec([4, 3], table).expect("table");
    let rows = rfx::jit(|t: Tensor, i: Tensor| t.take(i, 0));
    let pick = Array::from_vec([2, 3], vec![3i32, 0, -2, 9, 1, 2]).expect("index");
    let out = rows.call((&table, &pick)).expect("rows");
    assert_eq!(out[0].shape().dims(), [2, 3, 3]);
    let want: Vec<f64> = [3usize, 0, 0, 3, 1, 2]
        .iter()
        .flat_map(|&r| (0..3).map(move |c| (3 * r + c) as f64 * 1.5 - 4.0))
        .collect();
    assert_eq!(f64s(&out[0]), &want[..]);
    let one = rfx::jit(|t: Tensor, i: Tensor| t.take(i, 0));
    let out = one
        .call((&table, &Array::from_vec([], vec![2.7f64]).expect("scalar")))
        .expect("row");
    assert_eq!(out[0].shape().dims(), [3]);
    assert_eq!(f64s(&out[0]), [5.0, 6.5, 8.0]);
    let columns = rfx::jit(|t: Tensor, i: Tensor| t.take_along_axis(i, 1));
    let at = Array::from_vec(
        [4, 2],
        vec![0.0f64, 2.0, f64::NAN, 1.9, 5.0, -1.0, 1.0, f64::INFINITY],
    )
    .expect("at");
    let out = columns.call((&table, &at)).expect("columns");
    let want: Vec<f64> = [(0, 0), (0, 2), (1, 0), (1, 1), (2, 2), (2, 0), (3, 1), (3, 2)]
        .iter()
        .map(|&(r, c)| (3 * r + c) as f64 * 1.5 - 4.0)
        .collect();
    assert_eq!(f64s(&out[0]), &want[..]);

    // A batch of lookups in one table (vmap over the index only): each row is the single call.
    let batched = rfx::jit(rfx::vmap(|t: Tensor, i: Tensor| t.take(i, 0)).in_axes(&[None, Some(0)]));
    let picks = Array::from_vec([3, 2], vec![1i32, 3, 0, 0, 2, 7]).expect("picks");
    let out = batched.call((&table, &picks)).expect("batched");
    assert_eq!(out[0].shape().dims(), [3, 2, 3]);
    for b in 0..3 {
        let pick = picks.as_slice::<i32>().expect("i32")[2 * b..2 * b + 2].to_vec();
        let single = rows
            .call((&table, &Array::from_vec([2], pick).expect("pick")))
            .expect("single");
        assert_eq!(&f64s(&out[0])[6 * b..6 * b + 6], f64s(&single[0]), "example {b}");
    }
}

#[test]
fn bad_lookups_are_typed_errors() {
    let table = [1.0f32, 2.0, 3.0];
    let flags = [true, false];
    let by_bool = rfx::jit(|t: Tensor, i: Tensor| t.take(i, 0));
    assert_eq!(
        type_error(by_bool.call((&table, &flags)).expect_err("a bool index")),
        TypeError::UnsupportedDType {
            op: "gather",
            dtype: DType::Bool
        }
    );
    let axis = rfx::jit(|t: Tensor, i: Tensor| t.take(i, 1));
    assert_eq!(
        type_error(axis.call((&table, &[0i32][..])).expect_err("no axis 1")),
        TypeError::AxisOutOfRange { axis: 1, rank: 1 }
    );
    let shapes = rfx::jit(|t: Tensor, i: Tensor| t.take_along_axis(i, 0));
    let index = Array::from_vec([1, 2], vec![0i32, 1]).expect("index");
    assert!(matches!(
        type_error(shapes.call((&table, &index)).expect_err("ranks differ")),
        TypeError::Gather { axis: 0, .. }
    ));
    let empty = rfx::jit(|t: Tensor, i: Tensor| t.take(i, 0));
    assert!(matches!(
        type_error(
            empty
                .call((&[0.0f32; 0][..], &[0i32][..]))
                .expect_err("an empty table")
        ),
        TypeError::Gather { .. }
    ));
}
