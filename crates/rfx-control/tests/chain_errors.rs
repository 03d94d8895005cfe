//! `Chain::from_urdf` and the chain functions on bad input: each problem is its own
//! `ChainError` (or, for a jitted kernel called with the wrong `q`, a `CallError::Shape`),
//! never a panic.

use rfx::Tensor;
use rfx_control::{Chain, ChainError};

/// A robot with `body` between its tags.
fn robot(body: &str) -> String {
    format!(r#"<robot name="r">{body}</robot>"#)
}

const LINKS: &str = r#"<link name="a"/><link name="b"/><link name="c"/>"#;

fn joint(name: &str, kind: &str, parent: &str, child: &str) -> String {
    format!(
        r#"<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/><axis xyz="0 0 1"/></joint>"#
    )
}

fn error(urdf: &str) -> ChainError {
    match Chain::from_urdf(urdf) {
        Ok(chain) => panic!("accepted: {chain:?}"),
        Err(e) => e,
    }
}

#[test]
fn malformed_xml_and_missing_attributes_are_malformed() {
    for text in [
        "<robot name=\"r\"><link name=\"a\">",
        "<robot><joint name=\"j\" type=\"revolute\"><child link=\"a\"/></joint></robot>",
        "<robot><link name=\"a\"/><joint name=\"j\" type=\"rotary\"><parent link=\"a\"/><child link=\"a\"/></joint></robot>",
    ] {
        let e = error(text);
        assert!(matches!(e, ChainError::Malformed { .. }), "{text}: {e:?}");
        assert!(e.to_string().starts_with("malformed URDF"), "{e}");
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let e = error("/nonexistent/robot.urdf");
    let ChainError::Io { path, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(path.to_str(), Some("/nonexistent/robot.urdf"));
    assert!(e.to_string().contains("/nonexistent/robot.urdf"), "{e}");
}

#[test]
fn structural_problems_are_typed() {
    assert!(matches!(error(&robot("")), ChainError::NoLinks));
    let e = error(&robot(r#"<link name="a"/><link name="a"/>"#));
    assert!(
        matches!(&e, ChainError::DuplicateName { what: "link", name } if name == "a"),
        "{e:?}"
    );
    let e = error(&robot(&format!(
        "{LINKS}{}{}",
        joint("j", "fixed", "a", "b"),
        joint("j", "fixed", "b", "c")
    )));
    assert!(
        matches!(&e, ChainError::DuplicateName { what: "joint", name } if name == "j"),
        "{e:?}"
    );
    let e = error(&robot(&format!("{LINKS}{}", joint("j", "fixed", "a", "hand"))));
    assert!(
        matches!(&e, ChainError::JointLinkMissing { joint, link } if joint == "j" && link == "hand"),
        "{e:?}"
    );
    // A closed loop: c is the child of both a and b.
    let e = error(&robot(&format!(
        "{LINKS}{}{}{}",
        joint("ab", "fixed", "a", "b"),
        joint("bc", "revolute", "b", "c"),
        joint("ac", "revolute", "a", "c")
    )));
    assert!(
        matches!(&e, ChainError::MultipleParents { link, first, second } if link == "c" && first == "bc" && second == "ac"),
        "{e:?}"
    );
    let e = error(&robot(&format!("{LINKS}{}", joint("ab", "fixed", "a", "b"))));
    assert!(
        matches!(&e, ChainError::MultipleRoots { roots } if roots == &["a", "c"]),
        "{e:?}"
    );
    assert!(e.to_string().contains("a, c"), "{e}");
    // b and c hang from each other, a is the root: a cycle off the tree.
    let e = error(&robot(&format!(
        "{LINKS}{}{}",
        joint("bc", "fixed", "b", "c"),
        joint("cb", "fixed", "c", "b")
    )));
    assert!(matches!(&e, ChainError::Cycle { .. }), "{e:?}");
    // Every link has a parent: a cycle and no root.
    let e = error(&robot(&format!(
        "{LINKS}{}{}{}",
        joint("ab", "fixed", "a", "b"),
        joint("bc", "fixed", "b", "c"),
        joint("ca", "fixed", "c", "a")
    )));
    assert!(matches!(&e, ChainError::Cycle { .. }), "{e:?}");
}

#[test]
fn floating_planar_and_spherical_joints_are_unsupported() {
    for kind in ["floating", "planar", "spherical"] {
        let e = error(&robot(&format!("{LINKS}{}", joint("free", kind, "a", "b"))));
        assert!(
            matches!(&e, ChainError::UnsupportedJoint { joint, kind: k } if joint == "free" && *k == kind),
            "{kind}: {e:?}"
        );
        assert!(
            e.to_string()
                .contains("only revolute, continuous, prismatic and fixed"),
            "{e}"
        );
    }
}

#[test]
fn a_zero_axis_is_bad_geometry() {
    let text = robot(
        r#"<link name="a"/><link name="b"/><joint name="j" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 0"/></joint>"#,
    );
    assert!(matches!(error(&text), ChainError::BadGeometry { joint } if joint == "j"));
    // A fixed joint's axis is never used.
    let fixed = text.replace("continuous", "fixed");
    assert_eq!(Chain::from_urdf(&fixed).expect("fixed").dof(), 0);
}

#[test]
fn unknown_links_and_wrong_q_are_typed() {
    let chain = Chain::from_urdf(&robot(&format!(
        "{LINKS}{}{}",
        joint("ab", "revolute", "a", "b"),
        joint("bc", "prismatic", "b", "c")
    )))
    .expect("chain");
    assert_eq!(chain.dof(), 2);
    assert!(matches!(chain.fk_jit("hand"), Err(ChainError::UnknownLink { link }) if link == "hand"));
    assert!(matches!(
        chain.path_to("hand"),
        Err(ChainError::UnknownLink { .. })
    ));

    // Traced: the functions return the error while tracing.
    let f = rfx::jit(rfx::Func::with_constants(move |q: Tensor| {
        let e = chain.fk(q, "c").expect_err("3 joint positions for 2 joints");
        assert!(
            matches!(&e, ChainError::JointCount { expected: 2, found } if found.dims() == [4, 3]),
            "{e:?}"
        );
        assert!(matches!(
            chain.jacobian(q, "c"),
            Err(ChainError::JointCount { .. })
        ));
        assert!(matches!(
            chain.fk_pose(q, "z"),
            Err(ChainError::UnknownLink { .. })
        ));
        q
    }));
    f.call((&rfx::array([4, 3], vec![0.0f64; 12]).expect("q"),))
        .expect("traced");

    // Jitted: the call is rejected before tracing.
    let chain = Chain::from_urdf(&robot(&format!(
        "{LINKS}{}{}",
        joint("ab", "revolute", "a", "b"),
        joint("bc", "fixed", "b", "c")
    )))
    .expect("chain");
    let fk = chain.fk_jit("c").expect("kernel");
    for (dims, len) in [(vec![4, 3], 12), (vec![], 1)] {
        let e = fk
            .call((&rfx::array(dims.clone(), vec![0.0f64; len]).expect("q"),))
            .expect_err("wrong q");
        let rfx::JitError::Call(rfx::CallError::Shape {
            name,
            expected,
            found,
        }) = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(name, "q");
        assert_eq!(found.dims(), dims.as_slice());
        assert_eq!(expected.dims().last(), Some(&1), "{e}");
    }
}
