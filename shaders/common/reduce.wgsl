// common/reduce.wgsl: reductions across the WG lanes of one workgroup, for the kernels that
// reduce one row per workgroup (cross_entropy, attention_cached). The kernel defines
// `const WG: u32` (a power of two); the scratch `red` belongs to this snippet. Call from
// uniform control flow: every lane returns the result (a fixed tree, so the same bits on
// every run).

var<workgroup> red: array<f32, WG>;

// The maximum of `v` over the workgroup's lanes.
fn workgroup_max(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step = step / 2u) {
        if lid < step {
            red[lid] = max(red[lid], red[lid + step]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// The sum of `v` over the workgroup's lanes.
fn workgroup_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step = step / 2u) {
        if lid < step {
            red[lid] = red[lid] + red[lid + step];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
