//! Root of one per-ISA kernel object. The build compiles this file three
//! times, once per CPU level, and links all three objects into the one
//! shared library; each copy exports its kernels as `cfk_<variant>_<name>`.
//! These symbols are internal to the library (the root dispatches to them
//! after validating every argument) and are not part of the public ABI.

const std = @import("std");
const abi = @import("abi.zig");
const k = @import("kernels.zig");

const assert = std.debug.assert;
const prefix = "cfk_" ++ @tagName(k.variant) ++ "_";

pub const Table = @import("table.zig").Table;

fn quantizeQ8_0(x: [*]const f32, n_blocks: usize, out: [*]abi.BlockQ8_0) callconv(.c) bool {
    assert(n_blocks > 0);
    return k.quantizeQ8_0(x[0 .. n_blocks * abi.qk], out[0..n_blocks]);
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

fn rope(x: [*]f32, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: [*]const f32, mode: u32) callconv(.c) void {
    assert(mode <= 1);
    k.rope(x[0 .. n_heads * head_dim], n_heads, head_dim, n_rot, pos, inv_freq[0 .. n_rot / 2], @enumFromInt(mode));
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

comptime {
    // Every field of the dispatch table is exported under the variant's prefix.
    const impls = .{
        .quantize_q8_0 = &quantizeQ8_0,
        .block_dots_q4_0 = &blockDotsQ4_0,
        .block_dots_q8_0 = &blockDotsQ8_0,
        .matvec_rows_q4_0 = &matvecRowsQ4_0,
        .matvec_rows_q8_0 = &matvecRowsQ8_0,
        .rms_norm = &rmsNorm,
        .softmax = &softmax,
        .rope = &rope,
        .silu_mul = &siluMul,
        .gelu_mul = &geluMul,
        .stream_read = &streamRead,
    };
    for (std.meta.fields(Table)) |field| {
        const f: field.type = @field(impls, field.name);
        @export(f, .{ .name = prefix ++ field.name, .linkage = .strong, .visibility = .hidden });
    }
}

test {
    _ = k;
}
