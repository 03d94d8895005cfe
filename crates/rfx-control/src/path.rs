//! Path tracking: where a vehicle is relative to a path of waypoints.

use rfx::Jit;

use crate::build::{ControlKernel, column, func};

/// The tracking errors of N vehicles against one path (the inputs of a Stanley or pure-pursuit
/// steering law), elementwise over the vehicles.
///
/// Inputs `x`, `y`, `heading` (N poses, radians) and `path_x`, `path_y` (M >= 2 waypoints,
/// shared by every vehicle; inputs, so a new path of the same length needs no recompile).
/// Outputs, for the point of the polyline nearest to each vehicle:
///
/// - `segment`: the index `j` of its segment (from waypoint `j` to `j + 1`), as `i32`; the
///   first of equally near segments (a vehicle exactly at a shared waypoint gets the earlier
///   one);
/// - `cross_track`: the signed distance to it, positive where the vehicle is left of the path
///   (the cross product of the segment's direction and the offset from its start is positive)
///   and exactly `+distance` on the path's line;
/// - `heading_error`: the segment's direction less `heading`, wrapped into `[-π, π]`.
///
/// ```text
/// d_j = p - a_j,  e_j = b_j - a_j
/// t_j = clamp(d_j·e_j / |e_j|², 0, 1)          (0 for a segment of length zero)
/// j   = argmin_j |d_j - t_j e_j|²
/// cross_track   = ±|d_j - t_j e_j|  with the sign of e_j × d_j
/// heading_error = atan2(sin θ, cos θ),  θ = atan2(e_j.y, e_j.x) - heading
/// ```
///
/// Every segment's distance is computed in one loop nest over `[N, M - 1]`, the nearest is an
/// [`rfx::Tensor::argmin`], and the chosen segment's values are read back by lookups
/// ([`rfx::Tensor::take`]). A path of fewer than two waypoints has no segment, a typed error
/// (`TypeError::EmptyAxis` inside [`rfx::JitError::Trace`]); a NaN coordinate of a vehicle
/// gives segment 0 and a NaN `cross_track`.
pub fn path_tracking() -> Jit<ControlKernel> {
    let inputs = ["x", "y", "heading", "path_x", "path_y"];
    let step = func("path_tracking", inputs, |[x, y, heading, path_x, path_y]| {
        let m = path_x.shape().dims().first().copied().unwrap_or(0);
        let segments = m.saturating_sub(1);
        let (ax, ay) = (path_x.slice_axis(0, ..segments), path_y.slice_axis(0, ..segments));
        let (ex, ey) = (path_x.slice_axis(0, 1..) - ax, path_y.slice_axis(0, 1..) - ay);
        // Each vehicle against each segment: its offsets along a new last axis.
        let (dx, dy) = (column(x) - ax, column(y) - ay);
        let len2 = ex * ex + ey * ey;
        let along = (dx * ex + dy * ey) / len2;
        let t = len2.gt(0.0).select(along, 0.0).clamp(0.0, 1.0);
        let (qx, qy) = (dx - t * ex, dy - t * ey);
        let d2 = qx * qx + qy * qy;
        let last = d2.shape().rank().saturating_sub(1);
        let j = d2.argmin(last);
        let dist = d2.min_over(last).sqrt();
        let (ejx, ejy) = (ex.take(j, 0), ey.take(j, 0));
        let cross = ejx * (y - ay.take(j, 0)) - ejy * (x - ax.take(j, 0));
        let cross_track = cross.lt(0.0).select(-dist, dist);
        let turn = ejy.atan2(ejx) - heading;
        let heading_error = turn.sin().atan2(turn.cos());
        vec![j, cross_track, heading_error]
    });
    ControlKernel::new("path_tracking", &inputs)
        .part(step, &["segment", "cross_track", "heading_error"])
        .jit()
}
