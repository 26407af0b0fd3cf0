//! Root of one per-ISA kernel object. The build compiles this file four
//! times, once per CPU level, and links all four objects into the one
//! shared library; each copy exports its kernels as `cfk_<variant>_<name>`.
//! These symbols are internal to the library (the root dispatches to them
//! after validating every argument) and are not part of the public ABI.

const std = @import("std");
const abi = @import("abi.zig");
const k = @import("kernels.zig");
const panels = @import("panels.zig");
const attn = @import("attention.zig");
const bk = @import("block_kernels.zig");
const blocks = @import("blocks.zig");

const assert = std.debug.assert;
const prefix = "cfk_" ++ @tagName(k.variant) ++ "_";

pub const Table = @import("table.zig").Table;

fn quantizeQ8_0(x: [*]const f32, n_blocks: usize, out: [*]abi.BlockQ8_0) callconv(.c) bool {
    assert(n_blocks > 0);
    return k.quantizeQ8_0(x[0 .. n_blocks * abi.qk], out[0..n_blocks]);
}

/// quantizeQ8_0, then each block's scale (its f16, exactly as f32) and the
/// sum of its 32 quants, for the matmuls' ActRows: the variant's F16C
/// conversion and vector sums instead of the baseline root's.
fn quantizeAct(x: [*]const f32, n_blocks: usize, out: [*]abi.BlockQ8_0, scales: [*]u8, sums: [*]u8) callconv(.c) bool {
    assert(n_blocks > 0);
    if (!k.quantizeQ8_0(x[0 .. n_blocks * abi.qk], out[0..n_blocks])) return false;
    const bytes: [*]const u8 = @ptrCast(out);
    for (0..n_blocks) |g| {
        const blk = bytes + g * abi.q8_0_block_bytes;
        const d = abi.f16ToF32(std.mem.readInt(u16, blk[0..2], .little));
        const qv: @Vector(abi.qk, i8) = @bitCast(blk[2..][0..abi.qk].*);
        const sum: i32 = @reduce(.Add, @as(@Vector(abi.qk, i32), qv));
        std.mem.writeInt(u32, scales[g * 4 ..][0..4], @bitCast(d), .little);
        std.mem.writeInt(i32, sums[g * 4 ..][0..4], sum, .little);
    }
    return true;
}

fn blockDotsQ4_0(w: [*]const abi.BlockQ4_0, x: [*]const abi.BlockQ8_0, n_blocks: usize, out: [*]i32) callconv(.c) void {
    assert(n_blocks > 0);
    k.blockDotsQ4_0(w[0..n_blocks], x[0..n_blocks], out[0..n_blocks]);
}

fn blockDotsQ8_0(w: [*]const abi.BlockQ8_0, x: [*]const abi.BlockQ8_0, n_blocks: usize, out: [*]i32) callconv(.c) void {
    assert(n_blocks > 0);
    k.blockDotsQ8_0(w[0..n_blocks], x[0..n_blocks], out[0..n_blocks]);
}

fn matvecRowsQ4_0(w: [*]const abi.BlockQ4_0, x: [*]const abi.BlockQ8_0, n_blocks: usize, y: [*]f32, row_begin: usize, row_end: usize) callconv(.c) void {
    assert(n_blocks > 0 and row_begin <= row_end);
    k.matvecRowsQ4_0(w[0 .. row_end * n_blocks], x[0..n_blocks], y[0..row_end], row_begin, row_end);
}

fn matvecRowsQ8_0(w: [*]const abi.BlockQ8_0, x: [*]const abi.BlockQ8_0, n_blocks: usize, y: [*]f32, row_begin: usize, row_end: usize) callconv(.c) void {
    assert(n_blocks > 0 and row_begin <= row_end);
    k.matvecRowsQ8_0(w[0 .. row_end * n_blocks], x[0..n_blocks], y[0..row_end], row_begin, row_end);
}

fn rmsNorm(x: [*]const f32, w: [*]const f32, n: usize, eps: f32, out: [*]f32) callconv(.c) void {
    assert(n > 0);
    k.rmsNorm(x[0..n], w[0..n], eps, out[0..n]);
}

fn softmax(x: [*]f32, n: usize) callconv(.c) bool {
    assert(n > 0);
    return k.softmax(x[0..n]);
}

fn argmax(x: [*]const f32, n: usize, index: *usize) callconv(.c) u32 {
    assert(n > 0);
    const r = k.argmax(x[0..n]);
    index.* = r.index;
    return @intFromEnum(r.status);
}

fn rope(x: [*]f32, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: [*]const f32, mode: u32) callconv(.c) void {
    assert(mode <= 1);
    k.rope(x[0 .. n_heads * head_dim], n_heads, head_dim, n_rot, pos, inv_freq[0 .. n_rot / 2], @enumFromInt(mode));
}

fn ropeAngles(pos: u32, inv_freq: [*]const f32, pairs: usize, cs: [*]f32) callconv(.c) void {
    k.ropeAngles(pos, inv_freq[0..pairs], cs[0 .. 2 * pairs]);
}

fn ropeTable(x: [*]f32, n_heads: usize, head_dim: usize, n_rot: usize, cs: [*]const f32, mode: u32) callconv(.c) void {
    assert(mode <= 1);
    k.ropeTable(x[0 .. n_heads * head_dim], n_heads, head_dim, n_rot, cs[0..n_rot], @enumFromInt(mode));
}

fn siluMul(g: [*]const f32, u: [*]const f32, out: [*]f32, n: usize) callconv(.c) void {
    k.gatedMul(.silu, g[0..n], u[0..n], out[0..n]);
}

fn geluMul(g: [*]const f32, u: [*]const f32, out: [*]f32, n: usize) callconv(.c) void {
    k.gatedMul(.gelu, g[0..n], u[0..n], out[0..n]);
}

fn streamRead(p: [*]const u8, n: usize) callconv(.c) u64 {
    return k.streamRead(p[0..n]);
}

fn tileStripe(t: u32, base: [*]const u8, tr: usize, cols: usize, xq: [*]const abi.BlockQ8_0, xq_len: usize, xf: [*]const f32, xf_len: usize, y: [*]f32) callconv(.c) void {
    assert(t >= 1 and t <= 3 and tr >= 1);
    k.tileStripe(@enumFromInt(t), base, tr, cols, xq[0..xq_len], xf[0..xf_len], y[0..tr]);
}

/// kv_type: 1 = f32 cache, 2 = f16 cache.
fn attentionHead(kv_type: u32, q: [*]const f32, hd: usize, kc: *const anyopaque, vc: *const anyopaque, stride: usize, head_offset: usize, first: usize, n_pos: usize, scale: f32, softcap: f32, scores: [*]f32, out: [*]f32) callconv(.c) void {
    assert(hd >= 1 and first < n_pos);
    switch (kv_type) {
        1 => attn.attentionHead(f32, q[0..hd], @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos, scale, softcap, scores[0..n_pos], out[0..hd]),
        2 => attn.attentionHead(f16, q[0..hd], @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos, scale, softcap, scores[0..n_pos], out[0..hd]),
        else => unreachable,
    }
}

/// kv_type: 1 = f32 cache, 2 = f16 cache, 3 = Q8_0 blocks (element e is value
/// e % 32 of block e / 32); q and out hold group x hd values.
fn attentionGroup(kv_type: u32, q: [*]const f32, group: usize, hd: usize, kc: *const anyopaque, vc: *const anyopaque, stride: usize, head_offset: usize, first: usize, n_pos: usize, scale: f32, softcap: f32, out: [*]f32) callconv(.c) void {
    assert(hd >= 1 and first < n_pos);
    switch (kv_type) {
        1 => attn.attentionGroup(f32, q[0 .. group * hd], group, @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos, scale, softcap, out[0 .. group * hd]),
        2 => attn.attentionGroup(f16, q[0 .. group * hd], group, @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos, scale, softcap, out[0 .. group * hd]),
        3 => {
            assert(hd % abi.qk == 0 and stride % abi.qk == 0 and head_offset % abi.qk == 0);
            attn.attentionGroup(abi.BlockQ8_0, q[0 .. group * hd], group, @ptrCast(kc), @ptrCast(vc), stride, head_offset, first, n_pos, scale, softcap, out[0 .. group * hd]);
        },
        else => unreachable,
    }
}

/// kv_type as `attentionGroup`'s; `rows` query rows of `group` heads x hd
/// values, q_stride and out_stride floats apart, row r attending over cache
/// rows [first, n_pos0 + r).
fn attentionRows(kv_type: u32, q: [*]const f32, q_stride: usize, rows: usize, group: usize, hd: usize, kc: *const anyopaque, vc: *const anyopaque, stride: usize, head_offset: usize, first: usize, n_pos0: usize, scale: f32, softcap: f32, out: [*]f32, out_stride: usize) callconv(.c) void {
    assert(rows >= 1 and group >= 1 and hd >= 1 and first < n_pos0);
    assert(rows * group <= attn.attention_max_group and q_stride >= group * hd and out_stride >= group * hd);
    switch (kv_type) {
        1 => attn.attentionRows(f32, q, q_stride, rows, group, hd, @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos0, scale, softcap, out, out_stride),
        2 => attn.attentionRows(f16, q, q_stride, rows, group, hd, @ptrCast(@alignCast(kc)), @ptrCast(@alignCast(vc)), stride, head_offset, first, n_pos0, scale, softcap, out, out_stride),
        3 => {
            assert(hd % abi.qk == 0 and stride % abi.qk == 0 and head_offset % abi.qk == 0);
            attn.attentionRows(abi.BlockQ8_0, q, q_stride, rows, group, hd, @ptrCast(kc), @ptrCast(vc), stride, head_offset, first, n_pos0, scale, softcap, out, out_stride);
        },
        else => unreachable,
    }
}

fn attentionStackedRows(group: usize, hd: usize) callconv(.c) usize {
    return attn.stackedRows(group, hd, attn.tile_heads);
}

/// dst[i] = f16(src[i]), round to nearest even (F16C where the variant has it).
fn f32ToF16(src: [*]const f32, dst: [*]f16, n: usize) callconv(.c) void {
    for (src[0..n], dst[0..n]) |x, *d| d.* = @floatCast(x);
}

/// q: 1 = Q4_0 panels, 2 = Q8_0 panels, 3 = Q4_1 panels, 4 = Q4_K and
/// 5 = Q6_K panels (packing.zig; ng is then a multiple of 8), 6 = Q5_0.
fn packedPanels(q: u32, w: [*]const u8, n_panels: usize, ng: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) callconv(.c) void {
    assert(q >= 1 and q <= 6);
    panels.packedPanels(@enumFromInt(q), w, n_panels, ng, x, x_stride, n_tok, y, y_stride, rows);
}

/// t: a tile type of blocks.zig from 4 (Q4_1) to 11 (BF16).
fn blockStripe(t: u32, base: [*]const u8, tr: usize, cols: usize, act: [*]const u8, act_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize) callconv(.c) void {
    assert(t >= 4 and t <= blocks.max_tile_type and tr >= 1 and n_tok >= 1);
    bk.blockStripe(@enumFromInt(t), base, tr, cols, act, act_stride, n_tok, y, y_stride);
}

fn attentionTileHeads() callconv(.c) usize {
    return attn.tile_heads;
}

/// bits: 1, one-token panel kernels prefetch; 2, several tokens prefetch to
/// L2 (panel_prefetch.zig `multi_prefetch_l2`).
fn setPanelPrefetch(bits: u32) callconv(.c) void {
    assert(bits <= 3);
    panels.panel_prefetch.store(bits & 1 != 0, .monotonic);
    panels.multi_prefetch_l2.store(bits & 2 != 0, .monotonic);
}

comptime {
    // Every field of the dispatch table is exported under the variant's prefix.
    const impls = .{
        .quantize_q8_0 = &quantizeQ8_0,
        .quantize_act = &quantizeAct,
        .block_dots_q4_0 = &blockDotsQ4_0,
        .block_dots_q8_0 = &blockDotsQ8_0,
        .matvec_rows_q4_0 = &matvecRowsQ4_0,
        .matvec_rows_q8_0 = &matvecRowsQ8_0,
        .rms_norm = &rmsNorm,
        .softmax = &softmax,
        .argmax = &argmax,
        .rope = &rope,
        .rope_angles = &ropeAngles,
        .rope_table = &ropeTable,
        .silu_mul = &siluMul,
        .gelu_mul = &geluMul,
        .stream_read = &streamRead,
        .tile_stripe = &tileStripe,
        .attention_head = &attentionHead,
        .packed_panels = &packedPanels,
        .f32_to_f16 = &f32ToF16,
        .attention_group = &attentionGroup,
        .attention_rows = &attentionRows,
        .attention_stacked_rows = &attentionStackedRows,
        .attention_tile_heads = &attentionTileHeads,
        .block_stripe = &blockStripe,
        .set_panel_prefetch = &setPanelPrefetch,
    };
    for (std.meta.fields(Table)) |field| {
        const f: field.type = @field(impls, field.name);
        @export(f, .{ .name = prefix ++ field.name, .linkage = .strong, .visibility = .hidden });
    }
}

test {
    _ = k;
    _ = @import("block_dots.zig");
    _ = @import("float_kernels.zig");
    _ = @import("tiles.zig");
    _ = @import("quantize_q8_0.zig");
    _ = bk;
    _ = blocks;
    _ = @import("k_panels.zig");
    _ = @import("k_panels_test.zig");
    _ = panels;
    _ = attn;
    _ = @import("attention_test.zig");
}

test "quantize_act: the blocks quantizeQ8_0 writes, each block's f16 scale as f32 and its sum of quants" {
    var prng = std.Random.DefaultPrng.init(21);
    const rng = prng.random();
    const nb = 7;
    var x: [nb * abi.qk]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = (rng.float(f32) - 0.5) * @as(f32, @floatFromInt(1 + i % 5)) * 3.0;
    // A block of zeros (scale 0) and one with a subnormal f16 scale.
    @memset(x[0..abi.qk], 0);
    for (x[abi.qk .. 2 * abi.qk]) |*v| v.* *= 1e-6;
    var want: [nb]abi.BlockQ8_0 = undefined;
    try std.testing.expect(k.quantizeQ8_0(&x, &want));
    var got: [nb]abi.BlockQ8_0 = undefined;
    var scales: [nb * 4]u8 = undefined;
    var sums: [nb * 4]u8 = undefined;
    try std.testing.expect(quantizeAct(&x, nb, &got, &scales, &sums));
    try std.testing.expectEqualSlices(u8, std.mem.asBytes(&want), std.mem.asBytes(&got));
    const bytes: [*]const u8 = @ptrCast(&want);
    for (0..nb) |g| {
        const blk = bytes + g * abi.q8_0_block_bytes;
        const d = abi.f16ToF32(std.mem.readInt(u16, blk[0..2], .little));
        var sum: i32 = 0;
        for (blk[2..][0..abi.qk]) |b| sum += @as(i8, @bitCast(b));
        try std.testing.expectEqual(@as(u32, @bitCast(d)), std.mem.readInt(u32, scales[g * 4 ..][0..4], .little));
        try std.testing.expectEqual(sum, std.mem.readInt(i32, sums[g * 4 ..][0..4], .little));
    }
    // A non-finite value is refused, as quantizeQ8_0 refuses it.
    x[5] = std.math.nan(f32);
    try std.testing.expect(!quantizeAct(&x, nb, &got, &scales, &sums));
}
