//! `rfx::nalgebra` (the `nalgebra` feature): conversions checked against nalgebra's own
//! arithmetic through rfx kernels, with non-symmetric matrices and rotations about skewed
//! axes, so that a transposed matrix, a quaternion in nalgebra's `[x, y, z, w]` storage order,
//! or a conjugated rotation gives wrong numbers.
#![cfg(feature = "nalgebra")]

use nalgebra::{
    Isometry3, Matrix2x3, Matrix3, Point3, SMatrix, Translation3, UnitQuaternion, Vector3, Vector4,
};
use rfx::nalgebra::{
    NalgebraError, from_isometry3, from_isometry3_matrix, from_matrices, from_matrix, from_unit_quaternion,
    from_vector, from_vectors, read_row_major, to_isometry3, to_matrices, to_matrix, to_unit_quaternion,
    to_vector, to_vectors, write_row_major,
};
use rfx::{Array, DType, Tensor, TensorType};

fn f64s(array: &Array) -> &[f64] {
    array.as_slice::<f64>().expect("an f64 array")
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "element {i}: {g} != {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// A rotation about a skewed axis (no symmetric matrix, no zero component).
fn rotation() -> UnitQuaternion<f64> {
    UnitQuaternion::from_axis_angle(&nalgebra::Unit::new_normalize(Vector3::new(1.0, -2.0, 0.5)), 0.9)
}

#[test]
fn matrices_are_row_major_arrays_not_nalgebra_storage() {
    // Matrix2x3::new takes its entries row by row.
    let m = Matrix2x3::new(1.0, 2.0, 3.0, 4.0, 5.0, 6.0);
    let array = from_matrix(&m);
    assert_eq!(array.shape().dims(), &[2, 3]);
    assert_eq!(f64s(&array), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // nalgebra's storage is the column-major one, which read as [2, 3] is the transpose.
    assert_eq!(m.as_slice(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(to_matrix::<f64, 2, 3>(&array), Ok(m));
    // The same buffer as [3, 2] is another matrix (the array's shape decides).
    let as_3x2 = Array::from_vec([3, 2], f64s(&array).to_vec()).expect("array");
    assert_eq!(to_matrix::<f64, 3, 2>(&as_3x2).expect("3x2")[(0, 1)], 2.0);
}

#[test]
fn a_kernel_on_converted_matrices_agrees_with_nalgebra() {
    // y = A x and C = A B with non-symmetric A, B: a transpose anywhere changes the result.
    let a = Matrix3::new(2.0, -1.0, 0.5, 3.0, 4.0, -2.0, 0.25, 7.0, 1.0);
    let b = Matrix3::new(1.0, 0.0, 2.0, -3.0, 1.5, 0.0, 0.5, -1.0, 4.0);
    let x = Vector3::new(1.0, -2.0, 3.0);
    let f = rfx::jit(|a: Tensor, b: Tensor, x: Tensor| {
        (a.matmul(b), a.matmul(x.reshape(vec![3, 1])).reshape(vec![3]))
    });
    let out = f
        .call((&from_matrix(&a), &from_matrix(&b), &from_vector(&x)))
        .expect("call");
    assert_eq!(to_matrix::<f64, 3, 3>(&out[0]), Ok(a * b));
    assert_eq!(to_vector::<f64, 3>(&out[1]), Ok(a * x));
    assert_ne!(a * b, a.transpose() * b.transpose());
}

#[test]
fn row_major_slices_for_bound_kernels() {
    // A bound kernel's buffers: write A row-major, read Aᵀ back from a transpose kernel.
    let a = Matrix2x3::new(1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0);
    let mut kernel = rfx::jit(|a: Tensor| a.transpose(&[1, 0]))
        .bind(&[TensorType::new(DType::F32, [2, 3])])
        .expect("bind");
    let mut input = [0.0f32; 6];
    let mut output = [0.0f32; 6];
    write_row_major(&a, &mut input).expect("write");
    assert_eq!(input, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    kernel.run_slices([&input[..]], [&mut output[..]]).expect("run");
    let t: SMatrix<f32, 3, 2> = read_row_major(&output).expect("read");
    assert_eq!(t, a.transpose());
    assert_eq!(
        write_row_major(&a, &mut [0.0f32; 5]),
        Err(NalgebraError::Length {
            expected: 6,
            found: 5
        })
    );
    assert_eq!(
        read_row_major::<f32, 3, 2>(&output[..4]),
        Err(NalgebraError::Length {
            expected: 6,
            found: 4
        })
    );
}

#[test]
fn quaternions_are_w_x_y_z_and_rotate_as_nalgebra_does() {
    let q = rotation();
    let array = from_unit_quaternion(&q);
    assert_eq!(f64s(&array), &[q.w, q.i, q.j, q.k]);
    // nalgebra's storage puts w last.
    assert_eq!(q.coords, Vector4::new(q.i, q.j, q.k, q.w));
    let p = Vector3::new(0.3, -1.2, 2.0);
    let f = rfx::jit(|q: Tensor, p: Tensor| (rfx::lie::so3_act(q, p), rfx::lie::so3_to_matrix(q)));
    let out = f.call((&array, &from_vector(&p))).expect("call");
    assert_close(f64s(&out[0]), (q * p).as_slice(), 1e-14);
    let matrix = to_matrix::<f64, 3, 3>(&out[1]).expect("matrix");
    assert!((matrix - q.to_rotation_matrix().into_inner()).abs().max() < 1e-14);
    // And back.
    let back = to_unit_quaternion::<f64>(&out_quaternion(&q)).expect("back");
    assert!(back.angle_to(&q) < 1e-12);
}

fn out_quaternion(q: &UnitQuaternion<f64>) -> Array {
    // A quaternion a kernel returned a little off unit length, and as `-q` (the same rotation).
    let s = -1.000001;
    Array::from_vec([4], vec![s * q.w, s * q.i, s * q.j, s * q.k]).expect("array")
}

#[test]
fn isometries_are_the_lie_module_se3_layout_and_act_as_nalgebra_does() {
    let pose = Isometry3::from_parts(Translation3::new(0.5, -1.0, 2.5), rotation());
    let array = from_isometry3(&pose);
    let (q, t) = (pose.rotation, pose.translation.vector);
    assert_eq!(f64s(&array), &[q.w, q.i, q.j, q.k, t.x, t.y, t.z]);
    let p = Point3::new(0.3, -1.2, 2.0);
    let f = rfx::jit(|x: Tensor, p: Tensor| (rfx::lie::se3_act(x, p), rfx::lie::se3_to_matrix(x)));
    let out = f.call((&array, &from_vector(&p.coords))).expect("call");
    assert_close(f64s(&out[0]), (pose * p).coords.as_slice(), 1e-14);
    // The homogeneous matrix: rfx::lie's and from_isometry3_matrix's, row-major.
    let homogeneous = from_isometry3_matrix(&pose);
    assert_eq!(homogeneous.shape().dims(), &[4, 4]);
    assert_close(f64s(&out[1]), f64s(&homogeneous), 1e-14);
    assert_eq!(f64s(&homogeneous)[3], t.x, "the translation is the last column");
    let back = to_isometry3::<f64>(&array).expect("back");
    assert!((back.to_homogeneous() - pose.to_homogeneous()).abs().max() < 1e-15);
}

#[test]
fn f32_conversions() {
    let q = UnitQuaternion::from_axis_angle(&Vector3::y_axis(), 0.5f32);
    let array = from_unit_quaternion(&q);
    assert_eq!(array.dtype(), DType::F32);
    assert_eq!(to_unit_quaternion::<f32>(&array), Ok(q));
    let pose = Isometry3::from_parts(Translation3::new(1.0f32, 2.0, 3.0), q);
    let back = to_isometry3::<f32>(&from_isometry3(&pose)).expect("f32 pose");
    assert_eq!(back.translation, pose.translation);
}

#[test]
fn wrong_shapes_dtypes_and_quaternions_are_typed_errors() {
    let m = from_matrix(&Matrix2x3::new(1.0, 2.0, 3.0, 4.0, 5.0, 6.0));
    assert_eq!(
        to_matrix::<f64, 3, 2>(&m),
        Err(NalgebraError::Shape {
            expected: vec![3, 2],
            found: vec![2, 3]
        })
    );
    assert_eq!(
        to_matrix::<f32, 2, 3>(&m),
        Err(NalgebraError::DType {
            expected: DType::F32,
            found: DType::F64
        })
    );
    assert_eq!(
        to_vector::<f64, 6>(&m),
        Err(NalgebraError::Shape {
            expected: vec![6],
            found: vec![2, 3]
        })
    );
    let zero = Array::from_vec([4], vec![0.0f64; 4]).expect("array");
    assert_eq!(
        to_unit_quaternion::<f64>(&zero),
        Err(NalgebraError::Quaternion([0.0; 4]))
    );
    let nan = Array::from_vec([7], vec![f64::NAN, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]).expect("array");
    assert!(matches!(
        to_isometry3::<f64>(&nan),
        Err(NalgebraError::Quaternion(_))
    ));
    assert!(matches!(
        to_isometry3::<f64>(&zero),
        Err(NalgebraError::Shape { .. })
    ));
}

#[test]
fn batches_of_vectors_and_matrices_through_a_mapped_kernel() {
    // Per-example A_b x_b with vmap over axis 0, checked against nalgebra's products.
    let a = [
        Matrix3::new(2.0, -1.0, 0.5, 3.0, 4.0, -2.0, 0.25, 7.0, 1.0),
        Matrix3::new(1.0, 0.0, 2.0, -3.0, 1.5, 0.0, 0.5, -1.0, 4.0),
    ];
    let x = [Vector3::new(1.0, -2.0, 3.0), Vector3::new(0.5, 0.25, -1.0)];
    let batch_a = from_matrices(&a);
    assert_eq!(batch_a.shape().dims(), &[2, 3, 3]);
    assert_eq!(
        &f64s(&batch_a)[9..12],
        &[1.0, 0.0, 2.0],
        "the second matrix's first row"
    );
    let f = rfx::jit(rfx::vmap(|a: Tensor, x: Tensor| {
        a.matmul(x.reshape(vec![3, 1])).reshape(vec![3])
    }));
    let out = f.call((&batch_a, &from_vectors(&x))).expect("call");
    let y = to_vectors::<f64, 3>(&out[0]).expect("vectors");
    assert_eq!(y, vec![a[0] * x[0], a[1] * x[1]]);
    assert_eq!(to_matrices::<f64, 3, 3>(&batch_a), Ok(a.to_vec()));
    assert_eq!(
        to_vectors::<f64, 2>(&out[0]),
        Err(NalgebraError::Shape {
            expected: vec![2, 2],
            found: vec![2, 3]
        })
    );
    assert_eq!(
        to_matrices::<f64, 3, 3>(&out[0]),
        Err(NalgebraError::Shape {
            expected: vec![2, 3, 3],
            found: vec![2, 3]
        })
    );
}
