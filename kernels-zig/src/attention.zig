//! Attention over a KV cache: one query head (`attentionHead`, two passes
//! over a scores buffer); the query heads of one KV head together
//! (`attentionGroup`, an online softmax over blocks of positions, each K and
//! V slice loaded and converted once for a register tile of heads); and
//! consecutive rows of one sequence together (`attentionRows`: a prefill's
//! rows share the blocks they all attend to). The cache holds f32, f16 or
//! Q8_0 blocks; every path computes each score and each output with the
//! same operations in the same order, so results are bit-identical between
//! them and between variants of equal vector width.

const std = @import("std");
const kernels = @import("kernels.zig");
/// The element operations every path shares (attention_math.zig).
const am = @import("attention_math.zig");
pub const kvLoad = am.kvLoad;
pub const kvOne = am.kvOne;
pub const qLoad = am.qLoad;
pub const qOne = am.qOne;
pub const expNonPositive = am.expNonPositive;
pub const treeSum = am.treeSum;
const treeLevels = am.treeLevels;

const assert = std.debug.assert;
const lanes = kernels.lanes;
const exp = kernels.exp;

/// out = softmax(scale * q.K[j] (soft-capped), j in [first, n_pos)) . V.
/// Over an f16 cache, q is rounded to f16 first (`qLoad`).
/// K and V rows are `stride` elements apart; this head's values start at
/// `head_offset`. `scores` holds n_pos floats of scratch.
pub fn attentionHead(
    comptime T: type,
    q: []const f32,
    k: [*]const T,
    v: [*]const T,
    stride: usize,
    head_offset: usize,
    first: usize,
    n_pos: usize,
    scale: f32,
    softcap: f32,
    scores: []f32,
    out: []f32,
) void {
    const hd = q.len;
    assert(first < n_pos and scores.len >= n_pos and out.len == hd);
    var m: f32 = -std.math.inf(f32);
    for (first..n_pos) |j| {
        const krow = j * stride + head_offset;
        var dot: f32 = 0;
        const V = @Vector(lanes, f32);
        var acc: V = @splat(0);
        var d: usize = 0;
        if (lanes > 1) {
            while (d + lanes <= hd) : (d += lanes) {
                const kf = kvLoad(T, lanes, k, krow + d);
                const qv = qLoad(T, lanes, q, d);
                acc = @mulAdd(V, qv, kf, acc);
            }
        }
        dot = @reduce(.Add, acc);
        while (d < hd) : (d += 1) dot += qOne(T, q[d]) * kvOne(T, k, krow + d);
        var sc = dot * scale;
        if (softcap > 0) sc = softcap * std.math.tanh(sc / softcap);
        scores[j] = sc;
        m = @max(m, sc);
    }
    var sum: f32 = 0;
    for (first..n_pos) |j| {
        const e = exp(scores[j] - m);
        scores[j] = e;
        sum += e;
    }
    const inv = 1.0 / sum;
    @memset(out, 0);
    for (first..n_pos) |j| {
        const p = scores[j] * inv;
        const vrow = j * stride + head_offset;
        for (0..hd) |d| out[d] += p * kvOne(T, v, vrow + d);
    }
}

pub const attention_max_group: usize = 16;

pub const attention_block: usize = 32;

/// Heads of a group that one register tile takes together: the scores'
/// tile is `tile_heads` heads x `tile_rows` positions of accumulators (16 zmm
/// or 8 ymm), the outputs' tile `tile_heads` heads x `pv_cols` slices of
/// head_dim; each K or V value is loaded (and converted from f16 or Q8_0)
/// once for the tile's heads instead of once per head.
pub const tile_heads: usize = if (lanes >= 16) 4 else 2;
const tile_rows: usize = 4;
const pv_cols: usize = 4;
/// Query values an f16 cache's kernel rounds once per call into a stack
/// buffer (`qLoad`); a larger group x head_dim rounds as it goes.
pub const q_round_max: usize = 4096;

comptime {
    assert(lanes == 1 or lanes % tile_rows == 0);
}

/// Scores of positions [j0, j0 + nb) for every head of a group, into s:
/// L positions at a time (their L sums reduced together; a last chunk past
/// nb fills s[g][nb .. its end] with scores not used), or one at a time
/// where head_dim is not a multiple of L; each score gets the same
/// arithmetic either way. With `rounded`, qs holds what `qLoad` gives for
/// every value of q; otherwise it is q itself.
fn blockScores(
    comptime T: type,
    comptime rounded: bool,
    qs: []const f32,
    group: usize,
    hd: usize,
    k: [*]const T,
    stride: usize,
    head_offset: usize,
    j0: usize,
    nb: usize,
    scale: f32,
    softcap: f32,
    s: *[attention_max_group][attention_block]f32,
) void {
    const L = if (lanes > 1) lanes else 1;
    const V = @Vector(L, f32);
    var jb: usize = 0;
    // The last K row of the block: a last chunk of fewer than L positions
    // reads it again for its lanes past nb, whose scores are not used.
    const last_row = (j0 + nb - 1) * stride + head_offset;
    comptime assert(attention_block % L == 0);
    if (L > 1) {
        while (hd % L == 0 and jb < nb) : (jb += L) {
            var g0: usize = 0;
            while (g0 < group) {
                const gq = @min(tile_heads, group - g0);
                // part[g][t]: the fma chains of head g0 + g against the
                // tile_rows positions from j0 + jb + t * tile_rows (in
                // head_dim order), through treeSums' first levels.
                var part: [tile_heads][L / tile_rows]V = undefined;
                switch (gq) {
                    inline 1...tile_heads => |GQ| {
                        var r0: usize = 0;
                        while (r0 < L) : (r0 += tile_rows) {
                            const krow = (j0 + jb + r0) * stride + head_offset;
                            scoreTile(T, rounded, GQ, qs[g0 * hd ..][0 .. GQ * hd], hd, k, krow, stride, last_row, &part, r0);
                        }
                    },
                    else => unreachable,
                }
                for (0..gq) |gi| {
                    // The rest of treeSums(L, the L chains): what it gives.
                    const sc = treeLevels(L, L / tile_rows, L / tile_rows, &part[gi]) * @as(V, @splat(scale));
                    s[g0 + gi][jb..][0..L].* = sc;
                    if (softcap > 0) {
                        for (s[g0 + gi][jb..][0..L]) |*x| x.* = softcap * std.math.tanh(x.* / softcap);
                    }
                }
                g0 += gq;
            }
        }
    }
    // Where head_dim is not a multiple of L, one at a time. oneScore rounds
    // q again (`qLoad`): a value already rounded to f16 rounds to itself.
    while (jb < nb) : (jb += 1) {
        const krow = (j0 + jb) * stride + head_offset;
        for (0..group) |g| s[g][jb] = oneScore(T, qs[g * hd ..][0..hd], k, krow, scale, softcap);
    }
}

/// The dot products of GQ query heads (hd values each, at q) with the
/// `tile_rows` K rows from element `krow` on, stride apart (a row past
/// `last_row` reads `last_row` instead): L lanes at a
/// time in head_dim order, each K slice loaded once for the GQ heads; each
/// head's `tile_rows` chains go through treeSums' first levels while they
/// are in registers (`treeLevels`), into part_out[g][r0 / tile_rows]. With
/// `rounded`, q already holds `qLoad`'s values.
inline fn scoreTile(
    comptime T: type,
    comptime rounded: bool,
    comptime GQ: usize,
    q: []const f32,
    hd: usize,
    k: [*]const T,
    krow: usize,
    stride: usize,
    last_row: usize,
    part_out: *[tile_heads][lanes / tile_rows]@Vector(lanes, f32),
    r0: usize,
) void {
    const L = lanes;
    const V = @Vector(L, f32);
    assert(q.len == GQ * hd and hd % L == 0 and r0 + tile_rows <= L);
    var rows: [tile_rows]usize = undefined;
    inline for (0..tile_rows) |r| rows[r] = @min(krow + r * stride, last_row);
    var acc: [GQ][tile_rows]V = @splat(@splat(@splat(0)));
    var d: usize = 0;
    while (d < hd) : (d += L) {
        var qv: [GQ]V = undefined;
        inline for (0..GQ) |g| qv[g] = if (rounded) q[g * hd + d ..][0..L].* else qLoad(T, L, q[g * hd ..][0..hd], d);
        inline for (0..tile_rows) |r| {
            const kf = kvLoad(T, L, k, rows[r] + d);
            inline for (0..GQ) |g| acc[g][r] = @mulAdd(V, qv[g], kf, acc[g][r]);
        }
    }
    inline for (0..GQ) |g| part_out[g][r0 / tile_rows] = treeLevels(L, L, tile_rows, &acc[g]);
}

/// The score of one query head against the K row at element `krow`: the
/// dot product L lanes at a time in head_dim order, the lanes reduced as
/// `blockScores` reduces them, then scaled (and soft-capped).
pub inline fn oneScore(comptime T: type, qg: []const f32, k: [*]const T, krow: usize, scale: f32, softcap: f32) f32 {
    const L = if (lanes > 1) lanes else 1;
    const V = @Vector(L, f32);
    const hd = qg.len;
    var acc: V = @splat(0);
    var d: usize = 0;
    if (L > 1) {
        while (d + L <= hd) : (d += L) {
            const kf = kvLoad(T, L, k, krow + d);
            acc = @mulAdd(V, qLoad(T, L, qg, d), kf, acc);
        }
    }
    var dot: f32 = treeSum(L, acc);
    while (d < hd) : (d += 1) dot += qOne(T, qg[d]) * kvOne(T, k, krow + d);
    var sc = dot * scale;
    if (softcap > 0) sc = softcap * std.math.tanh(sc / softcap);
    return sc;
}

/// The first half of one block of an online softmax, for every head of a
/// group: m[g], the running maximum, is taken over the block's scores
/// s[g][0..nb] too, and corr[g] = exp(m - m') is the factor that the head's
/// earlier sum and output take (0 before its first block). The factors of
/// all heads come from one vector exp (lane g what one head's scalar exp
/// gives: `expNonPositive` works lane by lane).
inline fn softmaxMaxima(s: *const [attention_max_group][attention_block]f32, group: usize, nb: usize, m: []f32, corr: *[attention_max_group]f32) void {
    const V = @Vector(attention_max_group, f32);
    assert(group >= 1 and group <= attention_max_group and m.len == group);
    var d: V = @splat(0);
    for (0..group) |g| {
        const new_m = @max(m[g], blockMax(&s[g], nb));
        d[g] = m[g] - new_m;
        corr[g] = if (m[g] == -std.math.inf(f32)) 0 else 1;
        m[g] = new_m;
    }
    const e = expNonPositive(attention_max_group, d);
    for (0..group) |g| {
        if (corr[g] != 0) corr[g] = e[g];
    }
}

/// The maximum of s[0..nb] (exact in any order for finite scores; a NaN
/// score makes the head's output NaN whichever maximum it yields): `vmaxps`
/// on x86, not the NaN-aware serial chain of `@reduce(.Max)`.
inline fn blockMax(s: *const [attention_block]f32, nb: usize) f32 {
    var bm: f32 = -std.math.inf(f32);
    var jm: usize = 0;
    if (lanes > 1 and nb >= 16) {
        var vm: @Vector(16, f32) = s[0..16].*;
        jm = 16;
        while (jm + 16 <= nb) : (jm += 16) vm = kernels.maxNoNan(16, vm, s[jm..][0..16].*);
        bm = kernels.maxLaneNoNan(16, vm);
    }
    for (s[jm..nb]) |x| bm = @max(bm, x);
    return bm;
}

/// The second half of one block of an online softmax, for one head: s[0..nb]
/// (scores) becomes exp(s - m) where m is the running maximum that
/// `softmaxMaxima` left; l, the running sum, is rescaled by corr and the
/// block's sum added: 16 exps at a time, each summed as a tree, then the
/// rest summed one by one (their exps still taken as one vector, whose
/// lanes past nb are not used).
inline fn softmaxExps(s: *[attention_block]f32, nb: usize, m: f32, l: *f32, corr: f32) void {
    const V16 = @Vector(16, f32);
    var sum: f32 = 0;
    var jj: usize = 0;
    while (jj + 16 <= nb) : (jj += 16) {
        const e = expNonPositive(16, s[jj..][0..16].* - @as(V16, @splat(m)));
        s[jj..][0..16].* = e;
        sum += treeSum(16, e);
    }
    if (jj < nb) {
        const rest = nb - jj;
        assert(rest < 16);
        var x: [16]f32 = @splat(m);
        @memcpy(x[0..rest], s[jj..nb]);
        const e: [16]f32 = expNonPositive(16, @as(V16, x) - @as(V16, @splat(m)));
        for (0..rest) |i| {
            s[jj + i] = e[i];
            sum += e[i];
        }
    }
    l.* = l.* * corr + sum;
}

/// Attention of `group` query heads (consecutive, head_dim values each, at
/// q) that share one KV head, over cache rows [first, n_pos): online
/// softmax over blocks of 32 positions, each K and V row read once for the
/// whole group. No scratch beyond the stack; out is group x head_dim.
/// Over an f16 cache, q is rounded to f16 first, as llama.cpp does
/// (`qLoad`).
pub fn attentionGroup(
    comptime T: type,
    q: []const f32,
    group: usize,
    k: [*]const T,
    v: [*]const T,
    stride: usize,
    head_offset: usize,
    first: usize,
    n_pos: usize,
    scale: f32,
    softcap: f32,
    out: []f32,
) void {
    assert(group >= 1 and group <= attention_max_group);
    assert(q.len % group == 0 and out.len == q.len and first < n_pos);
    const hd = q.len / group;
    const L = if (lanes > 1) lanes else 1;
    var m: [attention_max_group]f32 = undefined;
    var l: [attention_max_group]f32 = undefined;
    @memset(m[0..group], -std.math.inf(f32));
    @memset(l[0..group], 0);
    @memset(out, 0);
    // Over an f16 cache, q rounded to f16 once (what `qLoad` gives), not
    // once per K row.
    var q_round: [q_round_max]f32 align(64) = undefined;
    const rounded = T == f16 and L > 1 and hd % L == 0 and q.len <= q_round_max;
    if (rounded) {
        roundQ(T, q, q_round[0..q.len]);
        advance(T, true, q_round[0..q.len], group, hd, k, v, stride, head_offset, first, n_pos, scale, softcap, m[0..group], l[0..group], out);
    } else {
        advance(T, false, q, group, hd, k, v, stride, head_offset, first, n_pos, scale, softcap, m[0..group], l[0..group], out);
    }
    for (0..group) |g| {
        const inv = 1.0 / l[g];
        for (out[g * hd ..][0..hd]) |*o| o.* *= inv;
    }
}

/// dst = what `qLoad` gives for every value of src (L lanes at a time;
/// src.len a multiple of L).
fn roundQ(comptime T: type, src: []const f32, dst: []f32) void {
    const L = if (lanes > 1) lanes else 1;
    assert(src.len == dst.len and src.len % L == 0);
    var d: usize = 0;
    while (d < src.len) : (d += L) dst[d..][0..L].* = qLoad(T, L, src, d);
}

/// Query rows `attentionRows` takes together for groups of `group` heads of
/// `hd` values and register tiles of `tile` heads: as many as fit the
/// kernel's buffers (`attention_max_group` heads, `q_round_max` values),
/// fewer where that leaves a tile part empty (3 heads a row on 2-head tiles:
/// 4 rows, 6 whole tiles, not 5 rows and a tile of one). 1: one row at a time.
pub fn stackedRows(group: usize, hd: usize, tile: usize) usize {
    assert(group >= 1 and hd >= 1 and tile >= 1);
    if (group > attention_max_group or group * hd > q_round_max) return 1;
    var r = @min(attention_max_group / group, q_round_max / (group * hd));
    while (r > 1 and (r * group) % tile != 0) r -= 1;
    // No whole tiles at any count (e.g. 3 heads on 4-head tiles): the most.
    if (r == 1) r = @min(attention_max_group / group, q_round_max / (group * hd));
    return r;
}

/// Attention of `rows` consecutive query rows of one sequence: row r sits at
/// position n_pos0 - 1 + r and attends over cache rows [first, n_pos0 + r),
/// its `group` query heads (sharing one KV head, head_dim values each) at
/// q + r * q_stride, its output at out + r * out_stride. The whole blocks of
/// 32 positions every row attends to are computed for all rows' heads
/// together (each K and V slice loaded once for a register tile of heads,
/// whichever rows they belong to), the rest row by row. Every head gets
/// `attentionGroup`'s arithmetic, bit for bit: the same blocks from `first`
/// on, each head's scores, softmax and output on their own. A prefill of n
/// rows reads and converts its K/V rows about n / rows times instead of n.
pub fn attentionRows(
    comptime T: type,
    q: [*]const f32,
    q_stride: usize,
    rows: usize,
    group: usize,
    hd: usize,
    k: [*]const T,
    v: [*]const T,
    stride: usize,
    head_offset: usize,
    first: usize,
    n_pos0: usize,
    scale: f32,
    softcap: f32,
    out: [*]f32,
    out_stride: usize,
) void {
    const G = rows * group;
    const gh = group * hd;
    assert(rows >= 1 and group >= 1 and hd >= 1 and first < n_pos0);
    assert(G <= attention_max_group and G * hd <= q_round_max);
    assert(q_stride >= gh and out_stride >= gh);
    const B = attention_block;
    const L = if (lanes > 1) lanes else 1;
    var qs: [q_round_max]f32 align(64) = undefined;
    var o: [q_round_max]f32 align(64) = undefined;
    var m: [attention_max_group]f32 = undefined;
    var l: [attention_max_group]f32 = undefined;
    @memset(m[0..G], -std.math.inf(f32));
    @memset(l[0..G], 0);
    @memset(o[0 .. G * hd], 0);
    // The rows' heads side by side, rounded to f16 once over an f16 cache.
    const rounded = T == f16 and L > 1 and hd % L == 0;
    for (0..rows) |r| {
        const src = q[r * q_stride ..][0..gh];
        if (rounded) roundQ(T, src, qs[r * gh ..][0..gh]) else @memcpy(qs[r * gh ..][0..gh], src);
    }
    // Whole blocks all rows attend to (row 0 attends to the fewest).
    const shared_end = first + (n_pos0 - first) / B * B;
    const start = if (rows > 1) shared_end else first;
    switch (rounded) {
        inline else => |R| {
            if (rows > 1) advance(T, R, qs[0 .. G * hd], G, hd, k, v, stride, head_offset, first, shared_end, scale, softcap, m[0..G], l[0..G], o[0 .. G * hd]);
            for (0..rows) |r| advance(T, R, qs[r * gh ..][0..gh], group, hd, k, v, stride, head_offset, start, n_pos0 + r, scale, softcap, m[r * group ..][0..group], l[r * group ..][0..group], o[r * gh ..][0..gh]);
        },
    }
    for (0..rows) |r| {
        for (0..group) |g| {
            const inv = 1.0 / l[r * group + g];
            const src = o[r * gh + g * hd ..][0..hd];
            for (out[r * out_stride + g * hd ..][0..hd], src) |*dst, x| dst.* = x * inv;
        }
    }
}

/// The online softmax of `group` heads over the blocks of 32 positions from
/// j_start (a block boundary counted from the attention's first position)
/// to end: m, l and out (group x head_dim) carry each head's running
/// maximum, sum and unnormalized output from block to block. With
/// `rounded`, qs holds what `qLoad` gives for every value of q.
fn advance(
    comptime T: type,
    comptime rounded: bool,
    qs: []const f32,
    group: usize,
    hd: usize,
    k: [*]const T,
    v: [*]const T,
    stride: usize,
    head_offset: usize,
    j_start: usize,
    end: usize,
    scale: f32,
    softcap: f32,
    m: []f32,
    l: []f32,
    out: []f32,
) void {
    assert(group >= 1 and group <= attention_max_group and qs.len == group * hd);
    assert(m.len == group and l.len == group and out.len == group * hd);
    const B = attention_block;
    const L = if (lanes > 1) lanes else 1;
    const V = @Vector(L, f32);
    var s: [attention_max_group][B]f32 align(64) = undefined;
    var j0 = j_start;
    while (j0 < end) : (j0 += B) {
        const nb = @min(B, end - j0);
        blockScores(T, rounded, qs, group, hd, k, stride, head_offset, j0, nb, scale, softcap, &s);
        // Online softmax: rescale what was accumulated to the new maximum.
        var corr: [attention_max_group]f32 = undefined;
        softmaxMaxima(&s, group, nb, m, &corr);
        for (0..group) |g| {
            softmaxExps(&s[g], nb, m[g], &l[g], corr[g]);
            if (corr[g] != 1) {
                for (out[g * hd ..][0..hd]) |*o| o.* *= corr[g];
            }
        }
        // out += p . V: each L-lane slice of each head's output stays in a
        // register over the block's positions (in position order, as one
        // fma chain per lane), then the tail of head_dim one value at a time.
        // A tile of heads x `pv_cols` slices makes independent chains (an
        // fma chain alone waits on its latency) and loads each V slice once
        // for its heads.
        const d_vec: usize = if (L > 1) hd - hd % L else 0;
        var d: usize = 0;
        while (L > 1 and d + pv_cols * L <= d_vec) : (d += pv_cols * L) {
            var g0: usize = 0;
            while (g0 < group) {
                const gq = @min(tile_heads, group - g0);
                switch (gq) {
                    inline 1...tile_heads => |GQ| valueTile(T, GQ, &s, g0, out[g0 * hd ..][0 .. GQ * hd], hd, d, v, j0 * stride + head_offset, stride, nb),
                    else => unreachable,
                }
                g0 += gq;
            }
        }
        while (L > 1 and d < d_vec) : (d += L) {
            for (0..group) |g| {
                const o = out[g * hd + d ..][0..L];
                var acc: V = o.*;
                for (0..nb) |jj| {
                    const vf = kvLoad(T, L, v, (j0 + jj) * stride + head_offset + d);
                    acc = @mulAdd(V, @splat(s[g][jj]), vf, acc);
                }
                o.* = acc;
            }
        }
        for (0..nb) |jj| {
            const vrow = (j0 + jj) * stride + head_offset;
            for (d_vec..hd) |dd| {
                const vf = kvOne(T, v, vrow + dd);
                for (0..group) |g| out[g * hd + dd] += s[g][jj] * vf;
            }
        }
    }
}

/// out[g * hd + d ..][0 .. pv_cols * L] += p[g0 + g][jj] * V[row jj] over the
/// block's nb positions (rows from element `vrow` on, stride apart), for the
/// GQ heads at out: each lane one fma chain in position order, each V slice
/// loaded once for the GQ heads.
inline fn valueTile(
    comptime T: type,
    comptime GQ: usize,
    p: *const [attention_max_group][attention_block]f32,
    g0: usize,
    out: []f32,
    hd: usize,
    d: usize,
    v: [*]const T,
    vrow: usize,
    stride: usize,
    nb: usize,
) void {
    const L = lanes;
    const V = @Vector(L, f32);
    assert(out.len == GQ * hd and d + pv_cols * L <= hd and g0 + GQ <= attention_max_group and nb <= attention_block);
    var acc: [GQ][pv_cols]V = undefined;
    inline for (0..GQ) |g| {
        inline for (0..pv_cols) |c| acc[g][c] = out[g * hd + d + c * L ..][0..L].*;
    }
    for (0..nb) |jj| {
        var vf: [pv_cols]V = undefined;
        inline for (0..pv_cols) |c| vf[c] = kvLoad(T, L, v, vrow + jj * stride + d + c * L);
        inline for (0..GQ) |g| {
            const pg: V = @splat(p[g0 + g][jj]);
            inline for (0..pv_cols) |c| acc[g][c] = @mulAdd(V, pg, vf[c], acc[g][c]);
        }
    }
    inline for (0..GQ) |g| {
        inline for (0..pv_cols) |c| out[g * hd + d + c * L ..][0..L].* = acc[g][c];
    }
}
