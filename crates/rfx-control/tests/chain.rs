//! `rfx_control::Chain` against independent references: closed forms for small chains (a
//! planar two-link arm ending in a prismatic joint; a tree with two branches), and for the
//! UR5 and the Panda a plain `f64` product of homogeneous transforms of their published
//! parameters plus their Denavit–Hartenberg tables, at seeded random configurations. The
//! geometric Jacobian against central differences of the reference, rfx's AD through the
//! forward kinematics against the Jacobian, the SE(3) pose against the matrix, a `vmap` over
//! 256 configurations, on every backend of the build.

use crate::chain_ref;

use chain_ref::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::Tensor;
use rfx_control::{Chain, ChainOutput};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn ur5() -> Chain {
    Chain::from_urdf(&format!("{DATA}/ur5.urdf")).expect("ur5.urdf")
}

fn panda() -> Chain {
    Chain::from_urdf(&format!("{DATA}/panda.urdf")).expect("panda.urdf")
}

fn random_configs(n_dof: usize, count: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| (0..n_dof).map(|_| rng.random_range(-3.0..3.0)).collect())
        .collect()
}

fn q_array(configs: &[Vec<f64>]) -> rfx::Array {
    let n = configs[0].len();
    rfx::array(
        [configs.len(), n],
        configs.iter().flatten().copied().collect::<Vec<_>>(),
    )
    .expect("q")
}

/// Runs `link`'s transform, pose and Jacobian kernel on every backend and checks each
/// configuration against `reference` (the 4×4 product) and its central differences.
fn check_against(chain: &Chain, link: &str, reference: impl Fn(&[f64]) -> M4, configs: &[Vec<f64>]) {
    let n = chain.dof();
    let q = q_array(configs);
    let outputs = [ChainOutput::Transform, ChainOutput::Pose, ChainOutput::Jacobian];
    let kernel = chain.kernel(link, &outputs).expect("kernel");
    for backend in backends() {
        let f = rfx::jit(kernel.func().clone()).on_backend(backend);
        let Some(out) = run(link, backend, &f, (&q,)) else {
            continue;
        };
        let what = |name: &str, k: usize| format!("{backend} {link} {name} q#{k}");
        for (k, config) in configs.iter().enumerate() {
            let want = reference(config);
            assert_close(
                &what("transform", k),
                &out[0][16 * k..16 * (k + 1)],
                &flat(&want),
                1e-12,
            );
            let pose = &out[1][7 * k..7 * (k + 1)];
            let norm: f64 = pose[..4].iter().map(|c| c * c).sum();
            assert!(
                (norm - 1.0).abs() < 1e-13,
                "{}: |quat|² = {norm}",
                what("pose", k)
            );
            assert_close(
                &what("pose position", k),
                &pose[4..],
                &[want[0][3], want[1][3], want[2][3]],
                1e-12,
            );
            assert_close(
                &what("pose rotation", k),
                &quat_matrix(pose),
                &rotation(&want),
                1e-12,
            );
            let jac = &out[2][6 * n * k..6 * n * (k + 1)];
            let fd = jacobian_fd(&reference, config);
            for row in 0..6 {
                for (col, fd_col) in fd.iter().enumerate() {
                    let (got, want) = (jac[row * n + col], fd_col[row]);
                    assert!(
                        (got - want).abs() < 1e-8,
                        "{}: J[{row}][{col}] = {got}, finite differences {want}",
                        what("jacobian", k)
                    );
                }
            }
        }
    }
}

fn rotation(m: &M4) -> Vec<f64> {
    (0..3).flat_map(|i| (0..3).map(move |j| m[i][j])).collect()
}

/// The rotation matrix of a unit quaternion `[w, x, y, z]`.
fn quat_matrix(q: &[f64]) -> Vec<f64> {
    let (w, x, y, z) = (q[0], q[1], q[2], q[3]);
    vec![
        1.0 - 2.0 * (y * y + z * z),
        2.0 * (x * y - w * z),
        2.0 * (x * z + w * y),
        2.0 * (x * y + w * z),
        1.0 - 2.0 * (x * x + z * z),
        2.0 * (y * z - w * x),
        2.0 * (x * z - w * y),
        2.0 * (y * z + w * x),
        1.0 - 2.0 * (x * x + y * y),
    ]
}

#[test]
fn ur5_matches_the_product_of_its_published_transforms() {
    let chain = ur5();
    assert_eq!(
        chain.joint_names(),
        [
            "shoulder_pan_joint",
            "shoulder_lift_joint",
            "elbow_joint",
            "wrist_1_joint",
            "wrist_2_joint",
            "wrist_3_joint"
        ]
    );
    assert_eq!(chain.root(), "base_link");
    let configs = random_configs(6, 8, 1);
    check_against(
        &chain,
        "tool0",
        |q| chain_product(&[&UR5_ARM[..], &[UR5_TOOL0]].concat(), q),
        &configs,
    );
    check_against(
        &chain,
        "ee_link",
        |q| chain_product(&[&UR5_ARM[..], &[UR5_EE]].concat(), q),
        &configs,
    );
    // A link halfway: the columns of the joints past it are zero.
    check_against(
        &chain,
        "forearm_link",
        |q| chain_product(&UR5_ARM[..3], &q[..3]),
        &configs,
    );
}

#[test]
fn ur5_tool0_in_the_base_frame_is_the_dh_flange() {
    // `base` is `base_link` turned by π about z (ur_description), and `tool0` is the DH flange.
    let chain = ur5();
    let configs = random_configs(6, 8, 2);
    let fk = rfx::jit(rfx::Func::with_constants(move |q: Tensor| {
        let tool = chain.fk(q, "tool0").expect("tool0");
        let base = chain.fk(q, "base").expect("base");
        // base⁻¹ · tool, with base = [[Rb, 0], [0, 1]].
        base.transpose(&[0, 2, 1]).matmul(tool)
    }));
    let out = fk.call((&q_array(&configs),)).expect("fk");
    let got = out[0].to_f64_vec();
    for (k, config) in configs.iter().enumerate() {
        assert_close(
            &format!("q#{k}"),
            &got[16 * k..16 * (k + 1)],
            &flat(&ur5_dh(config)),
            1e-12,
        );
    }
}

#[test]
fn panda_matches_its_published_transforms_and_its_modified_dh_table() {
    let chain = panda();
    assert_eq!(chain.dof(), 7);
    assert_eq!(chain.joints()[3].limits, Some((-3.0718, -0.0698)));
    let configs = random_configs(7, 8, 3);
    check_against(
        &chain,
        "panda_hand_tcp",
        |q| chain_product(&[&PANDA_ARM[..], &PANDA_TAIL].concat(), q),
        &configs,
    );
    check_against(&chain, "panda_link8", panda_mdh, &configs);
    check_against(
        &chain,
        "panda_link4",
        |q| chain_product(&PANDA_ARM[..4], &q[..4]),
        &configs,
    );
}

/// A planar arm: revolute `q1` at the origin, revolute `q2` at `(l1, 0, 0)`, then a prismatic
/// joint sliding `d` along the second link from `(l2, 0, 0)`.
const PLANAR: &str = r#"<robot name="planar">
  <link name="base"/><link name="link1"/><link name="link2"/><link name="tool"/>
  <joint name="q1" type="continuous"><parent link="base"/><child link="link1"/><axis xyz="0 0 1"/></joint>
  <joint name="q2" type="revolute"><parent link="link1"/><child link="link2"/>
    <origin xyz="0.7 0 0"/><axis xyz="0 0 2"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="d" type="prismatic"><parent link="link2"/><child link="tool"/>
    <origin xyz="0.4 0 0"/><axis xyz="1 0 0"/><limit lower="0" upper="0.5" effort="1" velocity="1"/></joint>
</robot>"#;

#[test]
fn planar_arm_with_a_prismatic_joint_matches_its_closed_form() {
    let (l1, l2) = (0.7, 0.4);
    let chain = Chain::from_urdf(PLANAR).expect("planar");
    let configs = [vec![0.3, -1.1, 0.2], vec![-2.0, 0.5, 0.05], vec![0.0, 0.0, 0.0]];
    let f = chain.jacobian_jit("tool").expect("kernel");
    let out = f.call((&q_array(&configs),)).expect("call");
    let (m, jac) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    for (k, c) in configs.iter().enumerate() {
        let (q1, q2, d) = (c[0], c[1], c[2]);
        let (s1, c1, s12, c12) = (q1.sin(), q1.cos(), (q1 + q2).sin(), (q1 + q2).cos());
        let reach = l2 + d;
        let want_m = [
            c12,
            -s12,
            0.0,
            l1 * c1 + reach * c12, //
            s12,
            c12,
            0.0,
            l1 * s1 + reach * s12, //
            0.0,
            0.0,
            1.0,
            0.0, //
            0.0,
            0.0,
            0.0,
            1.0,
        ];
        assert_close(
            &format!("transform q#{k}"),
            &m[16 * k..16 * (k + 1)],
            &want_m,
            1e-15,
        );
        #[rustfmt::skip]
        let want_j = [
            -l1 * s1 - reach * s12, -reach * s12, c12,
            l1 * c1 + reach * c12, reach * c12, s12,
            0.0, 0.0, 0.0,
            0.0, 0.0, 0.0,
            0.0, 0.0, 0.0,
            1.0, 1.0, 0.0,
        ];
        assert_close(
            &format!("jacobian q#{k}"),
            &jac[18 * k..18 * (k + 1)],
            &want_j,
            1e-15,
        );
    }
}

/// A torso raised by `h` with two arms of length `L` hanging from shoulders at `y = ±w`: the
/// left one turns about y, the right one about x turned by a yaw of π/2 (so about y as well,
/// seen from the base).
const BRANCHED: &str = r#"<robot name="branched">
  <link name="base"/><link name="torso"/>
  <link name="left_arm"/><link name="left_tip"/><link name="right_arm"/><link name="right_tip"/>
  <joint name="lift" type="fixed"><parent link="base"/><child link="torso"/><origin xyz="0 0 1.2"/></joint>
  <joint name="left" type="continuous"><parent link="torso"/><child link="left_arm"/>
    <origin xyz="0 0.3 0"/><axis xyz="0 1 0"/></joint>
  <joint name="left_hand" type="fixed"><parent link="left_arm"/><child link="left_tip"/><origin xyz="0 0 -0.5"/></joint>
  <joint name="right" type="continuous"><parent link="torso"/><child link="right_arm"/>
    <origin xyz="0 -0.3 0" rpy="0 0 1.5707963267948966"/><axis xyz="1 0 0"/></joint>
  <joint name="right_hand" type="fixed"><parent link="right_arm"/><child link="right_tip"/><origin xyz="0 0 -0.5"/></joint>
</robot>"#;

#[test]
fn branches_match_their_closed_forms() {
    let (h, w, l) = (1.2, 0.3, 0.5);
    let chain = Chain::from_urdf(BRANCHED).expect("branched");
    assert_eq!(chain.joint_names(), ["left", "right"]);
    let configs = [vec![0.4, -0.9], vec![-2.5, 1.7]];
    let q = q_array(&configs);
    let left = chain
        .jacobian_jit("left_tip")
        .expect("left")
        .call((&q,))
        .expect("left");
    let right = chain
        .jacobian_jit("right_tip")
        .expect("right")
        .call((&q,))
        .expect("right");
    let torso = chain.fk_jit("torso").expect("torso").call((&q,)).expect("torso");
    for (k, c) in configs.iter().enumerate() {
        let (a, b) = (c[0], c[1]);
        // Left: Ry(a)·(0, 0, -L) + (0, w, h); right: Rz(π/2)·Rx(b)·(0, 0, -L) + (0, -w, h).
        let left_m = left[0].to_f64_vec();
        let right_m = right[0].to_f64_vec();
        let pos = |m: &[f64]| vec![m[16 * k + 3], m[16 * k + 7], m[16 * k + 11]];
        assert_close(
            "left tip",
            &pos(&left_m),
            &[-l * a.sin(), w, h - l * a.cos()],
            1e-15,
        );
        assert_close(
            "right tip",
            &pos(&right_m),
            &[-l * b.sin(), -w, h - l * b.cos()],
            1e-15,
        );
        assert_close("torso", &pos(&torso[0].to_f64_vec()), &[0.0, 0.0, h], 0.0);
        // Each tip moves with its own joint only: J = [[-L cos, 0, L sin], [0, 1, 0]] in its
        // column, zero in the other.
        #[rustfmt::skip]
        let left_j = [
            -l * a.cos(), 0.0, 0.0, 0.0, l * a.sin(), 0.0,
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0,
        ];
        #[rustfmt::skip]
        let right_j = [
            0.0, -l * b.cos(), 0.0, 0.0, 0.0, l * b.sin(),
            0.0, 0.0, 0.0, 1.0, 0.0, 0.0,
        ];
        assert_close(
            "left jacobian",
            &left[1].to_f64_vec()[12 * k..12 * (k + 1)],
            &left_j,
            1e-15,
        );
        assert_close(
            "right jacobian",
            &right[1].to_f64_vec()[12 * k..12 * (k + 1)],
            &right_j,
            1e-15,
        );
    }
}

#[test]
fn reverse_mode_through_fk_is_the_geometric_jacobian() {
    // d/dq of the 4×4 transform by rfx's AD, per configuration (vmap of a jacobian); the
    // position rows are J's linear rows, and dR/dqᵢ Rᵀ = [ωᵢ]× gives its angular rows.
    let chain = panda();
    let n = chain.dof();
    let configs = random_configs(n, 6, 4);
    let fk_chain = chain.clone();
    let ad = rfx::jit(rfx::vmap(rfx::jacobian(rfx::Func::with_constants(
        move |q: Tensor| fk_chain.fk(q, "panda_hand_tcp").expect("fk"),
    ))));
    let q = q_array(&configs);
    let out = ad.call((&q,)).expect("ad");
    let (m, dm) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    assert_eq!(out[1].shape().dims(), &[configs.len(), 4, 4, n]);
    let jac = chain
        .jacobian_jit("panda_hand_tcp")
        .expect("jacobian")
        .call((&q,))
        .expect("jacobian");
    let jac = jac[1].to_f64_vec();
    for k in 0..configs.len() {
        let m = &m[16 * k..16 * (k + 1)];
        let dm = &dm[16 * n * k..16 * n * (k + 1)];
        let d = |r: usize, c: usize, i: usize| dm[(r * 4 + c) * n + i];
        for i in 0..n {
            let w = |r: usize, c: usize| (0..3).map(|j| d(r, j, i) * m[c * 4 + j]).sum::<f64>();
            let column = [d(0, 3, i), d(1, 3, i), d(2, 3, i), w(2, 1), w(0, 2), w(1, 0)];
            for (row, value) in column.iter().enumerate() {
                let want = jac[6 * n * k + row * n + i];
                assert!(
                    (value - want).abs() < 1e-13,
                    "q#{k} J[{row}][{i}]: AD {value}, geometric {want}"
                );
            }
        }
    }
}

#[test]
fn derivatives_of_the_jacobian_match_finite_differences() {
    // The Jacobian is itself traced: its derivative (the Hessian of the position, what a
    // Newton IK step needs) by AD against central differences of the Jacobian kernel.
    let chain = ur5();
    let n = chain.dof();
    let config = random_configs(n, 1, 5).remove(0);
    let jac_chain = chain.clone();
    let djac = rfx::jit(rfx::jacobian(rfx::Func::with_constants(move |q: Tensor| {
        jac_chain.jacobian(q, "tool0").expect("jacobian")
    })));
    let q = rfx::array([n], config.clone()).expect("q");
    let out = djac.call((&q,)).expect("djac");
    let ad = out[1].to_f64_vec();
    let jac = chain.kernel("tool0", &[ChainOutput::Jacobian]).expect("kernel");
    let h = 1e-6;
    for i in 0..n {
        let mut qp = config.clone();
        let mut qm = config.clone();
        qp[i] += h;
        qm[i] -= h;
        let jp = jac.call((&rfx::array([n], qp).expect("q"),)).expect("j")[0].to_f64_vec();
        let jm = jac.call((&rfx::array([n], qm).expect("q"),)).expect("j")[0].to_f64_vec();
        for e in 0..6 * n {
            let fd = (jp[e] - jm[e]) / (2.0 * h);
            assert!(
                (ad[e * n + i] - fd).abs() < 1e-8,
                "dJ[{e}]/dq{i}: AD {}, fd {fd}",
                ad[e * n + i]
            );
        }
    }
}

#[test]
fn vmap_over_256_configurations_matches_the_reference() {
    let chain = ur5();
    let configs = random_configs(6, 256, 6);
    let fk_chain = chain.clone();
    let f = rfx::jit(rfx::vmap(rfx::Func::with_constants(move |q: Tensor| {
        vec![
            fk_chain.fk(q, "tool0").expect("fk"),
            fk_chain.jacobian(q, "tool0").expect("jacobian"),
        ]
    })));
    let out = f.call((&q_array(&configs),)).expect("vmap");
    assert_eq!(out[0].shape().dims(), &[256, 4, 4]);
    assert_eq!(out[1].shape().dims(), &[256, 6, 6]);
    let (m, jac) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    let reference = |q: &[f64]| chain_product(&[&UR5_ARM[..], &[UR5_TOOL0]].concat(), q);
    for (k, config) in configs.iter().enumerate() {
        assert_close(
            &format!("q#{k}"),
            &m[16 * k..16 * (k + 1)],
            &flat(&reference(config)),
            1e-12,
        );
    }
    // The Jacobian of a few of them against finite differences.
    for k in [0, 100, 255] {
        let fd = jacobian_fd(reference, &configs[k]);
        for row in 0..6 {
            for col in 0..6 {
                let got = jac[36 * k + row * 6 + col];
                assert!((got - fd[col][row]).abs() < 1e-8, "q#{k} J[{row}][{col}]");
            }
        }
    }
}

#[test]
fn pose_is_the_lie_groups_se3_element() {
    // fk_pose feeds rfx::lie directly: se3_to_matrix of the pose is the transform.
    let chain = panda();
    let configs = random_configs(7, 4, 7);
    let f = rfx::jit(rfx::Func::with_constants(move |q: Tensor| {
        let pose = chain.fk_pose(q, "panda_hand").expect("pose");
        vec![
            rfx::lie::se3_to_matrix(pose),
            chain.fk(q, "panda_hand").expect("fk"),
        ]
    }));
    let out = f.call((&q_array(&configs),)).expect("pose");
    assert_close(
        "se3_to_matrix(pose)",
        &out[0].to_f64_vec(),
        &out[1].to_f64_vec(),
        1e-14,
    );
}

#[test]
fn f32_configurations_run_at_f32_accuracy() {
    // One kernel per output: metal (wgpu) binds at most 32 storage buffers per kernel, which
    // the transform and the Jacobian together exceed.
    let chain = ur5();
    let configs = random_configs(6, 16, 8);
    let held: Vec<f64> = configs.iter().flatten().map(|&v| f64::from(v as f32)).collect();
    let q32: Vec<f32> = held.iter().map(|&v| v as f32).collect();
    let q = rfx::array([16, 6], q32).expect("q");
    let jac64 = chain.kernel("tool0", &[ChainOutput::Jacobian]).expect("kernel");
    let jac64 = jac64
        .call((&rfx::array([16, 6], held.clone()).expect("q"),))
        .expect("f64")[0]
        .to_f64_vec();
    let fk = chain.fk_jit("tool0").expect("kernel");
    let jac = chain.kernel("tool0", &[ChainOutput::Jacobian]).expect("kernel");
    let mut names = backends();
    if rfx_runtime::registry().names().contains(&"metal") {
        names.push("metal");
    }
    for backend in names {
        let f = rfx::jit(fk.func().clone()).on_backend(backend);
        let j = rfx::jit(jac.func().clone()).on_backend(backend);
        let (Some(m), Some(j)) = (
            run("f32 fk", backend, &f, (&q,)),
            run("f32 jacobian", backend, &j, (&q,)),
        ) else {
            continue;
        };
        for k in 0..configs.len() {
            let want = chain_product(&[&UR5_ARM[..], &[UR5_TOOL0]].concat(), &held[6 * k..6 * (k + 1)]);
            assert_close(
                &format!("{backend} f32 q#{k}"),
                &m[0][16 * k..16 * (k + 1)],
                &flat(&want),
                2e-6,
            );
        }
        assert_close(&format!("{backend} f32 jacobian"), &j[0], &jac64, 4e-6);
    }
}

#[test]
fn a_chain_of_fixed_joints_takes_an_empty_q() {
    let urdf = r#"<robot name="rigid"><link name="a"/><link name="b"/>
      <joint name="j" type="fixed"><parent link="a"/><child link="b"/><origin xyz="1 2 3" rpy="0 0 1.5707963267948966"/></joint>
    </robot>"#;
    let chain = Chain::from_urdf(urdf).expect("rigid");
    assert_eq!(chain.dof(), 0);
    let f = chain.jacobian_jit("b").expect("kernel");
    let out = f
        .call((&rfx::array([2, 0], Vec::<f64>::new()).expect("q"),))
        .expect("call");
    assert_eq!(out[1].shape().dims(), &[2, 6, 0]);
    let m = out[0].to_f64_vec();
    assert_eq!(out[0].shape().dims(), &[2, 4, 4]);
    assert_close("translation", &[m[3], m[7], m[11]], &[1.0, 2.0, 3.0], 0.0);
    assert_close(
        "rotation",
        &[m[0], m[1], m[4], m[5]],
        &[0.0, -1.0, 1.0, 0.0],
        1e-16,
    );
}

#[test]
fn the_kinematics_page_example_runs() {
    // docs/kinematics.md's Rust example, with its results checked.
    let ur5 = ur5();
    let kernel = ur5
        .kernel("tool0", &[ChainOutput::Transform, ChainOutput::Jacobian])
        .expect("kernel");
    let q = rfx::array(
        [2, 6],
        vec![0.0f64, -1.2, 1.1, 0.3, 1.5, 0.0, 0.4, -0.5, 0.9, -1.0, 0.2, 0.3],
    )
    .expect("q");
    let out = kernel.call((&q,)).expect("call");
    assert_eq!(out[0].shape().dims(), &[2, 4, 4]);
    assert_eq!(out[1].shape().dims(), &[2, 6, 6]);
    let chain = ur5.clone();
    let dp_dq = rfx::jit(rfx::vmap(rfx::jacobian(rfx::Func::with_constants(
        move |q: Tensor| {
            chain
                .fk(q, "tool0")
                .expect("a link of the chain")
                .slice_axis(1, 3..4)
                .slice_axis(0, 0..3)
        },
    ))));
    let d = dp_dq.call((&q,)).expect("dp_dq");
    assert_eq!(d[1].shape().dims(), &[2, 3, 1, 6]);
    // Its entries are the Jacobian's linear rows.
    let jac = out[1].to_f64_vec();
    let linear: Vec<f64> = (0..2).flat_map(|k| jac[36 * k..36 * k + 18].to_vec()).collect();
    assert_close("dp/dq", &d[1].to_f64_vec(), &linear, 1e-13);
}

#[test]
fn names_that_are_not_identifiers_still_make_kernels() {
    let urdf = r#"<robot name="my robot"><link name="base-0"/><link name="wrist 3.link"/>
      <joint name="j-1" type="revolute"><parent link="base-0"/><child link="wrist 3.link"/>
        <origin xyz="0 0 0.5"/><axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>"#;
    let chain = Chain::from_urdf(urdf).expect("chain");
    let out = chain
        .fk_jit("wrist 3.link")
        .expect("kernel")
        .call((&[0.5f64][..],))
        .expect("call");
    let m = out[0].to_f64_vec();
    let (s, c) = 0.5f64.sin_cos();
    assert_close(
        "rotation about x",
        &[m[5], m[6], m[9], m[10], m[11]],
        &[c, -s, s, c, 0.5],
        1e-16,
    );
}

#[test]
fn forward_mode_through_fk_is_the_geometric_jacobian() {
    // jvp with the tangent eᵢ in row i of a batch of copies of one configuration: row i of the
    // output tangent is ∂T/∂qᵢ.
    let chain = ur5();
    let n = chain.dof();
    let config = random_configs(n, 1, 9).remove(0);
    let copies: Vec<f64> = (0..n).flat_map(|_| config.clone()).collect();
    let tangents: Vec<f64> = (0..n * n)
        .map(|e| if e / n == e % n { 1.0 } else { 0.0 })
        .collect();
    let fk_chain = chain.clone();
    let jvp = rfx::jit(rfx::jvp(rfx::Func::with_constants(move |q: Tensor| {
        fk_chain.fk(q, "ee_link").expect("fk")
    })));
    let q = rfx::array([n, n], copies).expect("q");
    let out = jvp
        .call((&q, &rfx::array([n, n], tangents).expect("tangent")))
        .expect("jvp");
    let (m, dm) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    let jac = chain.kernel("ee_link", &[ChainOutput::Jacobian]).expect("kernel");
    let jac = jac
        .call((&rfx::array([n], config).expect("q"),))
        .expect("jacobian")[0]
        .to_f64_vec();
    for i in 0..n {
        let d = |r: usize, c: usize| dm[16 * i + 4 * r + c];
        let w = |r: usize, c: usize| (0..3).map(|j| d(r, j) * m[4 * c + j]).sum::<f64>();
        let column = [d(0, 3), d(1, 3), d(2, 3), w(2, 1), w(0, 2), w(1, 0)];
        for (row, value) in column.iter().enumerate() {
            let want = jac[row * n + i];
            assert!(
                (value - want).abs() < 1e-13,
                "J[{row}][{i}]: jvp {value}, geometric {want}"
            );
        }
    }
}

#[test]
fn damped_least_squares_ik_reaches_a_reachable_target() {
    // Position IK on the Panda with the chain's kernel: dq = Jvᵀ (Jv Jvᵀ + λ²I)⁻¹ (target - p),
    // the target being the reference FK of another configuration.
    let chain = panda();
    let kernel = chain.jacobian_jit("panda_hand_tcp").expect("kernel");
    let goal = [0.3, -0.4, 0.2, -1.9, 0.1, 1.6, 0.5];
    let want = chain_product(&[&PANDA_ARM[..], &PANDA_TAIL].concat(), &goal);
    let target = [want[0][3], want[1][3], want[2][3]];
    let mut q = vec![0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8];
    let mut error = f64::INFINITY;
    for _ in 0..50 {
        let out = kernel
            .call((&rfx::array([7], q.clone()).expect("q"),))
            .expect("call");
        let (m, jac) = (out[0].to_f64_vec(), out[1].to_f64_vec());
        let e = [target[0] - m[3], target[1] - m[7], target[2] - m[11]];
        error = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]).sqrt();
        if error < 1e-12 {
            break;
        }
        let jv = |r: usize, c: usize| jac[r * 7 + c];
        let a: [[f64; 3]; 3] = std::array::from_fn(|r| {
            std::array::from_fn(|c| {
                (0..7).map(|k| jv(r, k) * jv(c, k)).sum::<f64>() + if r == c { 1e-6 } else { 0.0 }
            })
        });
        let y = solve3(&a, e);
        for (k, qk) in q.iter_mut().enumerate() {
            *qk += (0..3).map(|r| jv(r, k) * y[r]).sum::<f64>();
        }
    }
    assert!(error < 1e-10, "IK error {error} after 50 steps");
}

/// `a⁻¹ b` for a 3×3 `a`, by cofactors.
fn solve3(a: &[[f64; 3]; 3], b: [f64; 3]) -> [f64; 3] {
    let cof = |r: usize, c: usize| {
        let (r1, r2) = ((r + 1) % 3, (r + 2) % 3);
        let (c1, c2) = ((c + 1) % 3, (c + 2) % 3);
        a[r1][c1] * a[r2][c2] - a[r1][c2] * a[r2][c1]
    };
    let det: f64 = (0..3).map(|c| a[0][c] * cof(0, c)).sum();
    std::array::from_fn(|i| (0..3).map(|j| cof(j, i) * b[j]).sum::<f64>() / det)
}
