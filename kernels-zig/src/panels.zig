//! Packed 16-row panels (`packing.zig`): the Q4_0, Q8_0, Q4_1 and Q5_0
//! panel kernels of every variant, written once over the variant's
//! dot-product primitive (`PanelDot`, panel_dot.zig), the token blocking
//! that runs them over a prefill batch (`panelTokens`, shared with the K
//! records of `k_panels.zig`), and the one-value-at-a-time reference the
//! tests hold every primitive to, bit for bit (`panelScalar`). The
//! in-kernel prefetch is in panel_prefetch.zig.
//!
//! Compiled once per variant with `kernels.zig` (the same module): one
//! 64-byte load feeds one `vpdpbusd` for 16 outputs on AVX-512 VNNI; other
//! primitives take 8 or 4 rows per vector.

const std = @import("std");
const abi = @import("abi.zig");
const k = @import("kernels.zig");
const packing = @import("packing.zig");
const kp = @import("k_panels.zig");
/// The in-kernel prefetch (panel_prefetch.zig), under its names here.
const pf = @import("panel_prefetch.zig");
const prefetch_ahead = pf.prefetch_ahead;
pub const panel_prefetch = &pf.panel_prefetch;
pub const multi_prefetch_l2 = &pf.multi_prefetch_l2;
pub const PrefetchTo = pf.PrefetchTo;
pub const prefetchRecord = pf.prefetchRecord;
pub const prefetchPart = pf.prefetchPart;
pub const prefetchSeveral = pf.prefetchSeveral;
/// The panel primitives' integer dot products (panel_dot.zig).
const pd = @import("panel_dot.zig");
pub const PanelPrim = pd.PanelPrim;
const PanelDot = pd.PanelDot;
const correction = pd.correction;

const assert = std.debug.assert;
const variant = k.variant;
const ActRow = packing.ActRow;
const readI32 = k.readI32;
const readF32 = k.readF32;
const BlockQ4_0 = abi.BlockQ4_0;
const BlockQ8_0 = abi.BlockQ8_0;

/// This variant's panel primitive; null runs the scalar loop (panelScalar).
pub const panel_prim: ?PanelPrim = switch (variant) {
    .scalar => null,
    .avx2 => .maddubs256,
    .avxvnni => .vnni256,
    .avx512vnni => .vnni512,
    .neon_dotprod => .sdot128,
    .neon => .smull128,
};

/// Tokens per weight load in a prefill batch or a batched decode step (the
/// register block is 16 rows x this many tokens; the rest of a batch goes in
/// halving blocks). 3 for 256-bit vectors (the Zen 5 EPYC, docs/KERNELS.md);
/// 8 for AVX-512, measured on a Zen 4 EPYC where 8 sequences decoding
/// together went from 566 to 773 tok/s on SmolLM2 Q4_0 and from 176 to 212
/// on Qwen2.5-Coder-0.5B, prefill unchanged within noise.
fn panelBlock(comptime prim: PanelPrim) usize {
    return switch (prim) {
        .vnni512 => 8,
        .vnni256 => 3,
        .maddubs256 => 3,
        // Not measured (no aarch64 machine here): 32 vector registers, as
        // AVX-512 has.
        .sdot128, .smull128 => 4,
    };
}

/// NT tokens against one panel: out[j][r] = row r . x_j for the 16 rows.
/// Per row and group: acc = fma(f32(sum(w * x)), d_w * d_x, acc), groups
/// left to right, the arithmetic of panelScalar whatever the vector width.
/// `stream`: the panel comes from memory (the first token block over it),
/// so the kernel prefetches ahead, up to `end`, the end of the call's panels.
inline fn panelSimd(comptime prim: PanelPrim, comptime q: packing.Quant, comptime NT: usize, panel: [*]const u8, ng: usize, stream: bool, end: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
    @setEvalBranchQuota(200000);
    const D = PanelDot(prim, q);
    const R = D.rows;
    const H = 16 / R;
    const VF = @Vector(R, f32);
    const rec = comptime packing.recordBytes(q);
    const n_chunks = comptime packing.groupBytes(q) / 4;
    const head = comptime packing.headBytes(q);
    comptime assert(R * H == packing.panel_rows and n_chunks * 64 + head == rec);
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    // One token streams each panel from memory: both halves of a record in
    // the group loop, so that each cache line is used whole while it is in
    // L1. Several tokens read the panel from cache: one half at a time over
    // all groups, so that a 256-bit variant's 16 registers hold one half's
    // accumulators without spilling. Each row's arithmetic is the same.
    const halves_outside = NT > 1 and H > 1;
    const HO = if (halves_outside) H else 1;
    const HI = if (halves_outside) 1 else H;
    const to_l2 = NT > 1 and stream and multi_prefetch_l2.load(.monotonic);
    inline for (0..HO) |ho| {
        var acc: [NT][HI]VF = undefined;
        inline for (0..NT) |j| {
            inline for (0..HI) |hi| acc[j][hi] = @splat(0);
        }
        for (0..ng) |g| {
            const r = panel + g * rec;
            if (stream and ho == 0) {
                const d = comptime std.math.divCeil(usize, prefetch_ahead, rec) catch unreachable;
                prefetchSeveral(to_l2, rec, d, d, 1, 0, r, end);
            }
            inline for (0..HI) |hi| {
                const h = ho + hi;
                const sc: @Vector(R, f16) = @bitCast(r[h * R * 2 ..][0 .. R * 2].*);
                const ws: VF = @floatCast(sc);
                var part: [NT]D.Acc = undefined;
                inline for (0..NT) |j| part[j] = D.zero();
                const qhv: D.VB = if (q == .q5_0) r[packing.scale_bytes + h * R * 4 ..][0 .. R * 4].* else undefined;
                inline for (0..n_chunks) |c| {
                    const wv: D.VB = r[head + c * 64 + h * R * 4 ..][0 .. R * 4].*;
                    const pw = if (q == .q5_0) D.prepare5(wv, qhv, c) else D.prepare(wv, NT > 1);
                    inline for (0..NT) |j| D.step(&part[j], pw, c, x + j * x_stride + g * abi.q8_0_block_bytes + 2);
                }
                inline for (0..NT) |j| {
                    const xr = x + j * x_stride;
                    const tot: VF = @floatFromInt(D.finish(part[j], readI32(xr + su + g * 4)));
                    const dx = readF32(xr + so + g * 4);
                    const s = ws * @as(VF, @splat(dx));
                    acc[j][hi] = @mulAdd(VF, tot, s, acc[j][hi]);
                    if (q == .q4_1) {
                        // + m d_x sum(x): the min of each row times the group's activations.
                        const mn: @Vector(R, f16) = @bitCast(r[packing.scale_bytes + h * R * 2 ..][0 .. R * 2].*);
                        const sx: f32 = @floatFromInt(readI32(xr + su + g * 4));
                        acc[j][hi] = @mulAdd(VF, @floatCast(mn), @splat(dx * sx), acc[j][hi]);
                    }
                }
            }
        }
        inline for (0..NT) |j| {
            inline for (0..HI) |hi| out[j][(ho + hi) * R ..][0..R].* = acc[j][hi];
        }
    }
}

/// The same arithmetic one value at a time (the scalar variant, and the
/// reference the tests hold every SIMD path to, bit for bit).
fn panelScalar(comptime q: packing.Quant, panel: [*]const u8, ng: usize, x: [*]const u8, out: *[16]f32) void {
    const rec = packing.recordBytes(q);
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    @memset(out, 0);
    for (0..ng) |g| {
        const r = panel + g * rec;
        const qs = x + g * abi.q8_0_block_bytes + 2;
        const dx = readF32(x + so + g * 4);
        const corr = readI32(x + su + g * 4) * correction(q);
        for (0..16) |lane| {
            var sum: i32 = 0;
            for (0..packing.groupBytes(q) / 4) |c| {
                for (0..4) |b| {
                    const wb: i32 = r[packing.headBytes(q) + c * 64 + lane * 4 + b];
                    if (q != .q8_0) {
                        // Q5_0: the fifth bits of columns 4c + b and 16 + 4c + b.
                        const qh: u32 = if (q == .q5_0) std.mem.readInt(u32, r[packing.scale_bytes + lane * 4 ..][0..4], .little) else 0;
                        const h_lo: i32 = @intCast((qh >> @intCast(4 * c + b)) & 1);
                        const h_hi: i32 = @intCast((qh >> @intCast(16 + 4 * c + b)) & 1);
                        sum += ((wb & 15) | (h_lo << 4)) * @as(i32, @as(i8, @bitCast(qs[4 * c + b])));
                        sum += ((wb >> 4) | (h_hi << 4)) * @as(i32, @as(i8, @bitCast(qs[16 + 4 * c + b])));
                    } else {
                        sum += wb * @as(i32, @as(i8, @bitCast(qs[4 * c + b])));
                    }
                }
            }
            const ws = abi.f16ToF32(@as(u16, r[lane * 2]) | (@as(u16, r[lane * 2 + 1]) << 8));
            const s = ws * dx;
            out[lane] = @mulAdd(f32, @floatFromInt(sum - corr), s, out[lane]);
            if (q == .q4_1) {
                const mn = abi.f16ToF32(@as(u16, r[packing.scale_bytes + lane * 2]) | (@as(u16, r[packing.scale_bytes + lane * 2 + 1]) << 8));
                const sx: f32 = @floatFromInt(readI32(x + su + g * 4));
                out[lane] = @mulAdd(f32, mn, dx * sx, out[lane]);
            }
        }
    }
}

/// One block of NT tokens against one panel: out rows [0, valid) of token j
/// to y[j * y_stride ..].
inline fn panelBlockOut(comptime K: type, comptime NT: usize, kern: K, stream: bool, panel: [*]const u8, x: [*]const u8, x_stride: usize, y: [*]f32, y_stride: usize, valid: usize) void {
    var out: [NT][16]f32 = undefined;
    kern.simd(NT, stream, panel, x, x_stride, &out);
    // A whole panel (every panel but a matrix's last, where rows % 16 != 0)
    // as one fixed-size copy: a run-time length is a call to libc's memcpy
    // for each token and panel.
    inline for (0..NT) |j| {
        if (valid == 16) {
            y[j * y_stride ..][0..16].* = out[j];
        } else {
            @memcpy(y[j * y_stride ..][0..valid], out[j][0..valid]);
        }
    }
}

/// Runs one panel kernel over panels [0, n_panels) of `pb` bytes each and
/// tokens [0, n_tok), writing the first `rows` rows: `kern.simd(NT, ...)` on
/// blocks of `K.block` tokens and then one block of the rest, or
/// `kern.scalar(...)` on the scalar variant. Every token gets the same
/// arithmetic whatever n_tok (each kernel's contract).
pub inline fn panelTokens(comptime K: type, kern: K, w: [*]const u8, pb: usize, n_panels: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) void {
    // One token prefetches as panel_prefetch says; several always do.
    const prefetch = panel_prefetch.load(.monotonic);
    for (0..n_panels) |p| {
        const panel = w + p * pb;
        const valid: usize = @min(16, rows - p * 16);
        var t: usize = 0;
        if (panel_prim != null) {
            comptime assert(K.block > 1);
            // Whole blocks, then the rest in one block of its own size: a
            // decode step of a few sequences, or a speculative check of a few
            // rows, reads each weight once (5 rows as 4 + 1 read the panel
            // twice and ran the one-token kernel over it).
            while (t + K.block <= n_tok) : (t += K.block) {
                panelBlockOut(K, K.block, kern, t == 0, panel, x + t * x_stride, x_stride, y + t * y_stride + p * 16, y_stride, valid);
            }
            const rest = n_tok - t;
            inline for (1..K.block) |nb| {
                if (rest == nb) panelBlockOut(K, nb, kern, t == 0 and (nb > 1 or prefetch), panel, x + t * x_stride, x_stride, y + t * y_stride + p * 16, y_stride, valid);
            }
        } else {
            while (t < n_tok) : (t += 1) {
                var out: [16]f32 = undefined;
                kern.scalar(panel, x + t * x_stride, &out);
                @memcpy(y[t * y_stride + p * 16 ..][0..valid], out[0..valid]);
            }
        }
    }
}

/// The Q4_0/Q8_0/Q4_1 panel kernels of `ng` 32-column groups, for panelTokens.
fn GroupPanels(comptime q: packing.Quant) type {
    return struct {
        ng: usize,
        end: [*]const u8,
        pub const block: usize = if (panel_prim) |prim| panelBlock(prim) else 1;
        pub inline fn simd(self: @This(), comptime NT: usize, stream: bool, panel: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
            panelSimd(panel_prim.?, q, NT, panel, self.ng, stream, self.end, x, x_stride, out);
        }
        pub inline fn scalar(self: @This(), panel: [*]const u8, x: [*]const u8, out: *[16]f32) void {
            panelScalar(q, panel, self.ng, x, out);
        }
    };
}

/// y[t * y_stride + 16 p + lane] = (row 16 p + lane) . x_t for panels
/// [0, n_panels) of a packed run and tokens [0, n_tok); only the first
/// `rows` rows are written (the rest are padding). x_t is the ActRow at
/// x + t * x_stride. Every token gets the same arithmetic whatever n_tok.
pub fn packedPanels(q: packing.Quant, w: [*]const u8, n_panels: usize, ng: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) void {
    assert(n_panels >= 1 and ng >= 1 and n_tok >= 1);
    assert(rows > (n_panels - 1) * 16 and rows <= n_panels * 16);
    @setEvalBranchQuota(200000);
    switch (q) {
        inline .q4_k, .q6_k => |qq| kp.kPanels(qq, w, n_panels, ng, x, x_stride, n_tok, y, y_stride, rows),
        inline .q4_0, .q8_0, .q4_1, .q5_0 => |qq| {
            const K = GroupPanels(qq);
            const pb = ng * packing.recordBytes(qq);
            panelTokens(K, K{ .ng = ng, .end = w + n_panels * pb }, w, pb, n_panels, x, x_stride, n_tok, y, y_stride, rows);
        },
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;

test "packed panels: every variant equals the one-value-at-a-time reference bit for bit, for 1..9 tokens" {
    var prng = std.Random.DefaultPrng.init(11);
    const rng = prng.random();
    inline for ([_]packing.Quant{ .q4_0, .q8_0, .q4_1, .q5_0 }) |q| {
        const ng: usize = 5;
        const n_panels: usize = 3;
        const rows: usize = 41;
        const rec = comptime packing.recordBytes(q);
        var w: [n_panels * ng * rec]u8 = undefined;
        rng.bytes(&w);
        for (0..n_panels * ng) |i| {
            for (0..16) |lane| {
                const d = abi.f32ToF16(rng.float(f32) * 0.1);
                w[i * rec + lane * 2] = @truncate(d);
                w[i * rec + lane * 2 + 1] = @truncate(d >> 8);
                if (q == .q4_1) {
                    const m = abi.f32ToF16(rng.float(f32) * 0.2 - 0.1);
                    w[i * rec + 32 + lane * 2] = @truncate(m);
                    w[i * rec + 32 + lane * 2 + 1] = @truncate(m >> 8);
                }
            }
        }
        const stride = ActRow.bytes(ng);
        var x: [9 * ActRow.bytes(5)]u8 align(64) = undefined;
        rng.bytes(&x);
        for (0..9) |t| {
            const xr = x[t * stride ..];
            var total: i32 = 0;
            for (0..ng) |g| {
                var sum: i32 = 0;
                // Activation quants are in [-127, 127], as the quantizer makes them.
                for (xr[g * 34 + 2 ..][0..32]) |*v| v.* = if (v.* == 0x80) 0x81 else v.*;
                for (0..32) |j| sum += @as(i8, @bitCast(xr[g * 34 + 2 + j]));
                std.mem.writeInt(i32, xr[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
                const d: f32 = rng.float(f32);
                std.mem.writeInt(u32, xr[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(d), .little);
                total += sum;
            }
        }
        // With and without the in-kernel prefetch (panel_prefetch), several
        // tokens prefetching to L1 and to L2 (multi_prefetch_l2): the same bits.
        defer panel_prefetch.store(true, .monotonic);
        defer multi_prefetch_l2.store(false, .monotonic);
        for (0..2 * 9) |case| {
            panel_prefetch.store(case < 9, .monotonic);
            multi_prefetch_l2.store(case >= 9, .monotonic);
            const n_tok = case % 9 + 1;
            var y: [9 * 48]f32 = [_]f32{-1} ** (9 * 48);
            packedPanels(q, &w, n_panels, ng, &x, stride, n_tok, &y, 48, rows);
            for (0..n_tok) |t| {
                for (0..n_panels) |p| {
                    var expect: [16]f32 = undefined;
                    panelScalar(q, w[p * ng * rec ..].ptr, ng, x[t * stride ..].ptr, &expect);
                    for (0..16) |lane| {
                        const r = p * 16 + lane;
                        if (r < rows) {
                            try testing.expectEqual(expect[lane], y[t * 48 + r]);
                        } else {
                            try testing.expectEqual(@as(f32, -1), y[t * 48 + r]);
                        }
                    }
                }
            }
        }
    }
}

test "packed panels agree with the ggml-row dot on the same weights" {
    var prng = std.Random.DefaultPrng.init(12);
    const rng = prng.random();
    const cols: usize = 64;
    const ng = cols / 32;
    var blocks4: [16 * ng]BlockQ4_0 = undefined;
    k.randomQ4Blocks(rng, &blocks4);
    var xb: [ng]BlockQ8_0 = undefined;
    k.randomQ8Blocks(rng, &xb, true);
    // Source tiles of one 16 x 64 matrix, then packed.
    const run = packing.Run.one(.q4_0, 16, cols);
    var src: [packing.tileBytes(.q4_0, 16, 64)]u8 = undefined;
    @memset(src[0..16], 0);
    for (0..16) |r| {
        for (0..ng) |g| {
            const b = blocks4[r * ng + g];
            std.mem.writeInt(u16, src[16 + (r * ng + g) * 2 ..][0..2], b.d, .little);
            @memcpy(src[16 + 16 * ng * 2 + (r * ng + g) * 16 ..][0..16], &b.qs);
        }
    }
    var dst: [ng * packing.recordBytes(.q4_0)]u8 = undefined;
    packing.packPanel(&run, &src, 0, 0, &dst);
    var x: [ActRow.bytes(ng)]u8 align(64) = undefined;
    @memcpy(x[0 .. ng * 34], std.mem.sliceAsBytes(&xb));
    for (0..ng) |g| {
        var sum: i32 = 0;
        for (xb[g].qs) |v| sum += v;
        std.mem.writeInt(i32, x[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
        std.mem.writeInt(u32, x[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(abi.f16ToF32(xb[g].d)), .little);
    }
    var y: [16]f32 = undefined;
    packedPanels(.q4_0, &dst, 1, ng, &x, x.len, 1, &y, 16, 16);
    for (0..16) |r| {
        const expect = k.scalar.dotQ4_0(blocks4[r * ng ..][0..ng], &xb);
        try k.expectCloseMag(expect, y[r], 1e-5, k.absTermsQ4(blocks4[r * ng ..][0..ng], &xb));
    }
}

test "Q4_1 panels agree with the Q4_1 tile stripe kernel on the same weights" {
    const bk = @import("block_kernels.zig");
    var prng = std.Random.DefaultPrng.init(13);
    const rng = prng.random();
    const rows: usize = 20;
    const cols: usize = 320; // two column tiles: 256 + 64
    const ng = cols / 32;
    // Source tiles (whole 20-byte blocks), one stripe.
    const run = packing.Run.one(.q4_1, rows, cols);
    var src: [packing.tileBytes(.q4_1, rows, 256) + packing.tileBytes(.q4_1, rows, 64)]u8 = undefined;
    rng.bytes(&src);
    var pos: usize = 0;
    for ([_]usize{ 256, 64 }) |tc| {
        for (0..rows * tc / 32) |b| {
            const at = pos + 16 + b * 20;
            std.mem.writeInt(u16, src[at..][0..2], abi.f32ToF16(rng.float(f32) * 0.1), .little);
            std.mem.writeInt(u16, src[at + 2 ..][0..2], abi.f32ToF16(rng.float(f32) * 0.2 - 0.1), .little);
        }
        pos += packing.tileBytes(.q4_1, rows, tc);
    }
    var dst: [2 * ng * packing.recordBytes(.q4_1)]u8 = undefined;
    for (0..2) |p| packing.packPanel(&run, &src, 0, p, dst[p * run.panelBytes(0) ..][0..run.panelBytes(0)]);
    var x: [ActRow.bytes(ng)]u8 align(64) = undefined;
    var xf: [cols]f32 = undefined;
    for (&xf) |*v| v.* = rng.floatNorm(f32);
    const xb: [*]BlockQ8_0 = @ptrCast(&x);
    try testing.expect(k.quantizeQ8_0(&xf, xb[0..ng]));
    for (0..ng) |g| {
        var sum: i32 = 0;
        for (xb[g].qs) |v| sum += v;
        std.mem.writeInt(i32, x[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
        std.mem.writeInt(u32, x[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(abi.f16ToF32(xb[g].d)), .little);
    }
    var y_panels: [rows]f32 = undefined;
    packedPanels(.q4_1, &dst, 2, ng, &x, x.len, 1, &y_panels, rows, rows);
    var y_tiles: [rows]f32 = undefined;
    bk.blockStripe(.q4_1, &src, rows, cols, &x, x.len, 1, &y_tiles, rows);
    for (y_panels, y_tiles) |a, b| try testing.expect(@abs(a - b) <= 1e-4 * (@abs(b) + 1));
}
