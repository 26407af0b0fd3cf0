//! Tests of k_panels.zig: the K panel kernels of every variant (`kPanels`)
//! against the one-value-at-a-time reference (`kPanelScalar`), bit for bit,
//! for 1..9 tokens with and without the in-kernel prefetch, and against the
//! f64 dot of ggml's dequantized values and the tile kernel
//! (block_kernels.zig `blockStripe`); with the random Q8_K ActRows and K
//! records they run on. Run from variant.zig's test block in every variant.

const std = @import("std");
const abi = @import("abi.zig");
const packing = @import("packing.zig");
const pn = @import("panels.zig");
const kp = @import("k_panels.zig");

const ActRow = packing.ActRow;
const kPanels = kp.kPanels;
const kPanelScalar = kp.kPanelScalar;

const testing = std.testing;
const blocks = @import("blocks.zig");

/// ActRows of `n_tok` tokens of `ng` random groups, laid out as Q8_K rows
/// (one scale per 8 groups); quants in [-127, 127].
fn randomActRows(rng: std.Random, ng: usize, n_tok: usize, out: []u8) void {
    const stride = ActRow.bytes(ng);
    rng.bytes(out);
    for (0..n_tok) |t| {
        const xr = out[t * stride ..];
        for (0..ng) |g| {
            var sum: i32 = 0;
            for (xr[g * 34 + 2 ..][0..32]) |*v| v.* = if (v.* == 0x80) 0x81 else v.*;
            for (0..32) |j| sum += @as(i8, @bitCast(xr[g * 34 + 2 + j]));
            std.mem.writeInt(i32, xr[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
            // The first 16 quants' sum in the block header, as act_q8_k.zig writes it.
            var first: i32 = 0;
            for (0..16) |j| first += @as(i8, @bitCast(xr[g * 34 + 2 + j]));
            std.mem.writeInt(i16, xr[g * 34 ..][0..2], @intCast(first), .little);
            const d: f32 = if (g % 8 == 0) rng.float(f32) * 0.05 else @bitCast(std.mem.readInt(u32, xr[ActRow.scalesOffset(ng) + (g - g % 8) * 4 ..][0..4], .little));
            std.mem.writeInt(u32, xr[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(d), .little);
        }
    }
}

/// Random K records with finite scales, as packing makes them from ggml blocks.
fn randomKPanels(comptime q: packing.Quant, rng: std.Random, out: []u8) void {
    const rec = packing.recordBytes(q);
    rng.bytes(out);
    var at: usize = 0;
    while (at < out.len) : (at += rec) {
        for (0..16) |lane| {
            const d = abi.f32ToF16(rng.float(f32) * 0.1);
            std.mem.writeInt(u16, out[at + lane * 2 ..][0..2], d, .little);
            if (q == .q4_k) {
                const dmin = abi.f32ToF16(rng.float(f32) * 0.1);
                std.mem.writeInt(u16, out[at + packing.k4_dmin + lane * 2 ..][0..2], dmin, .little);
                // Six-bit scales and mins.
                for (0..8) |j| {
                    out[at + packing.k4_sc + j * 16 + lane] &= 63;
                    out[at + packing.k4MinAt(j, lane)] &= 63;
                }
            }
        }
    }
}

test "K panels: every variant equals the one-value-at-a-time reference bit for bit, for 1..9 tokens" {
    var prng = std.Random.DefaultPrng.init(21);
    const rng = prng.random();
    inline for ([_]packing.Quant{ .q4_k, .q6_k }) |q| {
        const n_sb: usize = 2;
        const ng = n_sb * 8;
        const n_panels: usize = 3;
        const rows: usize = 37;
        const rec = comptime packing.recordBytes(q);
        var w: [n_panels * n_sb * rec]u8 = undefined;
        randomKPanels(q, rng, &w);
        const stride = ActRow.bytes(ng);
        var x: [9 * ActRow.bytes(16)]u8 align(64) = undefined;
        randomActRows(rng, ng, 9, &x);
        // With and without the in-kernel prefetch (panel_prefetch), several
        // tokens prefetching to L1 and to L2 (multi_prefetch_l2): the same bits.
        defer pn.panel_prefetch.store(true, .monotonic);
        defer pn.multi_prefetch_l2.store(false, .monotonic);
        for (0..2 * 9) |case| {
            pn.panel_prefetch.store(case < 9, .monotonic);
            pn.multi_prefetch_l2.store(case >= 9, .monotonic);
            const n_tok = case % 9 + 1;
            var y: [9 * 48]f32 = [_]f32{-1} ** (9 * 48);
            kPanels(q, &w, n_panels, ng, &x, stride, n_tok, &y, 48, rows);
            for (0..n_tok) |t| {
                for (0..n_panels) |p| {
                    var expect: [16]f32 = undefined;
                    kPanelScalar(q, w[p * n_sb * rec ..].ptr, n_sb, x[t * stride ..].ptr, &expect);
                    for (0..16) |lane| {
                        const r = p * 16 + lane;
                        const want: f32 = if (r < rows) expect[lane] else -1;
                        try testing.expectEqual(want, y[t * 48 + r]);
                    }
                }
            }
        }
    }
}

test "K panels agree with the f64 dot of ggml's values and with the tile kernel" {
    // 2, 8 and 19 super-blocks: Gemma 3's and Qwen2.5-0.5B's ffn_down have 8 and 19.
    inline for (.{ 2, 8, 19 }) |n_sb_test| try kAgainstDot(n_sb_test);
}

fn kAgainstDot(comptime n_sb_test: usize) !void {
    const bk = @import("block_kernels.zig");
    var prng = std.Random.DefaultPrng.init(22 + n_sb_test);
    const rng = prng.random();
    inline for ([_]packing.Quant{ .q4_k, .q6_k }) |q| {
        const b: blocks.Block = if (q == .q4_k) .q4_k else .q6_k;
        const rows: usize = 20;
        const cols: usize = 256 * n_sb_test;
        const bb = comptime packing.blockBytes(q);
        const nb = cols / 256;
        var src_blocks: [rows * nb * bb]u8 = undefined;
        rng.bytes(&src_blocks);
        for (0..rows * nb) |i| {
            const at: []const usize = if (q == .q4_k) &.{ 0, 2 } else &.{208};
            for (at) |o| std.mem.writeInt(u16, src_blocks[i * bb + o ..][0..2], abi.f32ToF16(rng.float(f32) * 0.1 + 0.001), .little);
        }
        // One stripe of nb 256-column tiles, each a header and a block per row.
        var src: [nb * packing.tileBytes(q, rows, 256)]u8 = undefined;
        for (0..nb) |t| {
            const pos = t * packing.tileBytes(q, rows, 256);
            @memset(src[pos..][0..packing.tile_header_bytes], 0);
            for (0..rows) |r| @memcpy(src[pos + packing.tile_header_bytes + r * bb ..][0..bb], src_blocks[(r * nb + t) * bb ..][0..bb]);
        }
        const run = packing.Run.one(q, rows, cols);
        var dst: [2 * nb * packing.recordBytes(q)]u8 = undefined;
        for (0..2) |p| packing.packPanel(&run, &src, 0, p, dst[p * run.panelBytes(0) ..][0..run.panelBytes(0)]);
        const ng = cols / 32;
        var x: [ActRow.bytes(ng)]u8 align(64) = undefined;
        randomActRows(rng, ng, 1, &x);
        var y_panels: [rows]f32 = undefined;
        kPanels(q, &dst, 2, ng, &x, x.len, 1, &y_panels, rows, rows);
        var y_tiles: [rows]f32 = undefined;
        bk.blockStripe(if (q == .q4_k) .q4_k else .q6_k, &src, rows, cols, &x, x.len, 1, &y_tiles, rows);
        for (0..rows) |r| {
            var want: f64 = 0;
            var mag: f64 = 0;
            var vals: [256]f32 = undefined;
            for (0..nb) |t| {
                blocks.dequantize(b, src_blocks[(r * nb + t) * bb ..].ptr, &vals);
                for (0..256) |i| {
                    const g = t * 8 + i / 32;
                    const dx: f64 = @as(f32, @bitCast(std.mem.readInt(u32, x[ActRow.scalesOffset(ng) + g * 4 ..][0..4], .little)));
                    const xv = dx * @as(f64, @floatFromInt(@as(i8, @bitCast(x[g * 34 + 2 + i % 32]))));
                    want += @as(f64, vals[i]) * xv;
                    mag += @abs(@as(f64, vals[i]) * xv);
                }
            }
            const tol = 1e-5 * mag + 1e-6;
            try testing.expect(@abs(want - y_panels[r]) <= tol);
            try testing.expect(@abs(want - y_tiles[r]) <= tol);
        }
    }
}
