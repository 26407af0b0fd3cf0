//! Packed 16-row panels (`packing.zig`): the Q4_0, Q8_0, Q4_1 and Q5_0
//! panel kernels of every variant, written once over the variant's
//! dot-product primitive (`PanelDot`), the token blocking that runs them over
//! a prefill batch (`panelTokens`, shared with the K records of
//! `k_panels.zig`), and the one-value-at-a-time reference the tests hold
//! every primitive to, bit for bit (`panelScalar`).
//!
//! Compiled once per variant with `kernels.zig` (the same module): one
//! 64-byte load feeds one `vpdpbusd` for 16 outputs on AVX-512 VNNI; other
//! primitives take 8 or 4 rows per vector.

const std = @import("std");
const abi = @import("abi.zig");
const k = @import("kernels.zig");
const packing = @import("packing.zig");
const kp = @import("k_panels.zig");

const assert = std.debug.assert;
const variant = k.variant;
const ActRow = packing.ActRow;
const readU32 = k.readU32;
const readI32 = k.readI32;
const readF32 = k.readF32;
const BlockQ4_0 = abi.BlockQ4_0;
const BlockQ8_0 = abi.BlockQ8_0;
const V8i32 = @Vector(8, i32);
const V16i16 = @Vector(16, i16);
const @"llvm.aarch64.neon.sdot.v4i32.v16i8" = k.@"llvm.aarch64.neon.sdot.v4i32.v16i8";
const @"llvm.x86.avx2.psign.b" = k.@"llvm.x86.avx2.psign.b";
const @"llvm.x86.avx2.pmadd.ub.sw" = k.@"llvm.x86.avx2.pmadd.ub.sw";
const @"llvm.x86.avx2.pmadd.wd" = k.@"llvm.x86.avx2.pmadd.wd";
const @"llvm.x86.avx512.vpdpbusd.256" = k.@"llvm.x86.avx512.vpdpbusd.256";
const @"llvm.x86.avx512.vpdpbusd.512" = k.@"llvm.x86.avx512.vpdpbusd.512";
fn correction(comptime q: packing.Quant) i32 {
    return switch (q) {
        .q4_0 => 8,
        .q8_0 => 128,
        // Q4_1's nibbles are its quants; its min term is added apart.
        .q4_1 => 0,
        // Q5_0's quants are 0..31, centred on 16.
        .q5_0 => 16,
        // K records have their own kernels (k_panels.zig).
        .q4_k, .q6_k => unreachable,
    };
}

/// How a variant computes a 32-column group of panel rows: its dot-product
/// primitive and how many of a panel's 16 rows one vector holds.
pub const PanelPrim = enum {
    /// `vpdpbusd` on zmm (AVX-512 VNNI): 16 rows per vector.
    vnni512,
    /// `vpdpbusd` on ymm (AVX-VNNI): 8 rows per vector.
    vnni256,
    /// `vpmaddubsw` + `vpmaddwd` on ymm (AVX2): 8 rows per vector.
    maddubs256,
    /// `sdot` on 128-bit vectors (aarch64 dotprod): 4 rows per vector.
    sdot128,
    /// Widening products `smull` + pairwise sums on 128-bit vectors
    /// (aarch64 Advanced SIMD): 4 rows per vector.
    smull128,
};

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

/// The exact integer dot products of one 32-column group of a panel with
/// one token's Q8_0 activation, for the `rows` panel rows one vector holds:
/// `prepare` readies a 4-column chunk of weights once for every token,
/// `step` adds its products, `finish` gives sum(w * x) per row.
///
/// - VNNI: unsigned weights (Q4_0 nibbles, Q8_0 `w XOR 0x80`) against
///   signed activations, corrected by `8 sum(x)` or `128 sum(x)`.
/// - AVX2, Q4_0: `vpmaddubsw` of nibbles (<= 15) with activations: a pair
///   is at most 2 * 15 * 128 = 3840 in magnitude, so the 8 pairs of the 4
///   chunks sum in i16 (<= 30720) before one `vpmaddwd`, then `- 8 sum(x)`.
/// - AVX2, Q8_0: the sign trick, `vpmaddubsw(|w|, sign(x, w))`: a pair is
///   at most 2 * 128 * 127 = 32512, within i16, because activation quants
///   are in [-127, 127] (the Q8_0 quantizer clamps them; the sign of -128
///   would not negate). Each chunk widens to i32 at once.
fn PanelDot(comptime prim: PanelPrim, comptime q: packing.Quant) type {
    return struct {
        pub const rows: usize = switch (prim) {
            .vnni512 => 16,
            .vnni256, .maddubs256 => 8,
            .sdot128, .smull128 => 4,
        };
        /// The NEON primitives multiply signed by signed: Q8_0 weights get
        /// their sign back in `prepare` and need no correction.
        const signed_weights = prim == .sdot128 or prim == .smull128;
        /// Q4_0, Q4_1 and Q5_0 records hold ggml's nibble bytes (Q5_0's fifth
        /// bits apart, `prepare5`).
        const nibbles = q != .q8_0;
        pub const VB = @Vector(rows * 4, u8);
        const VI = @Vector(rows, i32);
        const VX = @Vector(rows * 4, i8);
        pub const W = struct { a: VB, b: VB };
        pub const Acc = switch (prim) {
            .vnni512, .vnni256, .sdot128, .smull128 => [2]VI,
            // Q5_0's pairs (<= 2 * 31 * 128) widen every chunk.
            .maddubs256 => if (nibbles and q != .q5_0) V16i16 else V8i32,
        };

        pub inline fn zero() Acc {
            return switch (prim) {
                .vnni512, .vnni256, .sdot128, .smull128 => .{ @splat(0), @splat(0) },
                .maddubs256 => @splat(0),
            };
        }

        /// `several`: the chunk serves several tokens (a prefill block).
        pub inline fn prepare(wv: VB, comptime several: bool) W {
            if (nibbles) {
                return .{ .a = wv & @as(VB, @splat(0x0f)), .b = wv >> @as(@Vector(rows * 4, u3), @splat(4)) };
            }
            if (prim == .maddubs256) {
                const signed = wv ^ @as(VB, @splat(0x80));
                if (!several) return .{ .a = @bitCast(@abs(@as(VX, @bitCast(signed)))), .b = signed };
                // Several tokens: |w| as min(w, -w) over u8 (-128 gives
                // 128). `vpsubb` and `vpminub` run on the two vector pipes
                // that the multiplies leave free on Zen 4, where `vpabsb`
                // takes one of theirs. The zero comes from an `asm` block so
                // that LLVM does not fold the pair back into `vpabsb`.
                const zeros: VB = asm ("vpxor %[z], %[z], %[z]"
                    : [z] "=x" (-> VB),
                );
                return .{ .a = @min(signed, zeros -% signed), .b = signed };
            }
            if (signed_weights) {
                const signed = wv ^ @as(VB, @splat(0x80));
                return .{ .a = signed, .b = signed };
            }
            return .{ .a = wv, .b = wv };
        }

        /// Q5_0: chunk c's nibbles with their fifth bits from the rows' `qh`
        /// words (qhv: row r's word at bytes 4r..4r+3): byte b of a row gets
        /// bit 4c + b (low nibble, column 4c + b) and bit 16 + 4c + b (high
        /// nibble), spread by a byte shuffle within 128-bit lanes.
        pub inline fn prepare5(wv: VB, qhv: VB, comptime c: usize) W {
            const n = rows * 4;
            const masks = comptime blk: {
                var lo: [n]i32 = undefined;
                var hi: [n]i32 = undefined;
                var pat: [n]u8 = undefined;
                for (0..n) |i| {
                    lo[i] = @intCast((i / 4) * 4 + c / 2);
                    hi[i] = @intCast((i / 4) * 4 + 2 + c / 2);
                    pat[i] = @as(u8, 1) << @intCast(4 * (c % 2) + i % 4);
                }
                break :blk .{ .lo = lo, .hi = hi, .pat = pat };
            };
            const pat: VB = masks.pat;
            const zero_b: VB = @splat(0);
            const sixteen: VB = @splat(16);
            const rep_lo = @shuffle(u8, qhv, undefined, @as(@Vector(n, i32), masks.lo));
            const rep_hi = @shuffle(u8, qhv, undefined, @as(@Vector(n, i32), masks.hi));
            const p = prepare(wv, false);
            return .{
                .a = p.a | @select(u8, (rep_lo & pat) != zero_b, sixteen, zero_b),
                .b = p.b | @select(u8, (rep_hi & pat) != zero_b, sixteen, zero_b),
            };
        }

        /// Four activation bytes at p, broadcast to every row.
        inline fn broadcast(p: [*]const u8) VX {
            return @bitCast(@as(VI, @splat(@bitCast(readU32(p)))));
        }

        /// acc + the 4-byte dot of each row (u8 x i8 on x86, i8 x i8 on NEON).
        inline fn vnni(acc: VI, w: VB, x: VX) VI {
            return switch (prim) {
                .vnni512 => @"llvm.x86.avx512.vpdpbusd.512"(acc, @bitCast(w), @bitCast(x)),
                .vnni256 => @"llvm.x86.avx512.vpdpbusd.256"(acc, @bitCast(w), @bitCast(x)),
                .sdot128 => @"llvm.aarch64.neon.sdot.v4i32.v16i8"(acc, @bitCast(w), x),
                .smull128 => acc + k.dot4(rows, @bitCast(w), x),
                .maddubs256 => unreachable,
            };
        }

        /// Chunk c (columns 4c..4c+3, and 16+4c.. for Q4_0's high nibbles)
        /// of the group whose activation quants start at qs.
        pub inline fn step(acc: *Acc, w: W, comptime c: usize, qs: [*]const u8) void {
            switch (prim) {
                .vnni512, .vnni256, .sdot128, .smull128 => if (nibbles) {
                    acc[0] = vnni(acc[0], w.a, broadcast(qs + 4 * c));
                    acc[1] = vnni(acc[1], w.b, broadcast(qs + 16 + 4 * c));
                } else {
                    acc[c % 2] = vnni(acc[c % 2], w.a, broadcast(qs + 4 * c));
                },
                .maddubs256 => if (nibbles) {
                    const lo = @"llvm.x86.avx2.pmadd.ub.sw"(w.a, broadcast(qs + 4 * c));
                    const hi = @"llvm.x86.avx2.pmadd.ub.sw"(w.b, broadcast(qs + 16 + 4 * c));
                    if (q == .q5_0) {
                        acc.* += @"llvm.x86.avx2.pmadd.wd"(lo + hi, @splat(1));
                    } else {
                        acc.* += lo + hi;
                    }
                } else {
                    const xs = @"llvm.x86.avx2.psign.b"(broadcast(qs + 4 * c), @bitCast(w.b));
                    acc.* += @"llvm.x86.avx2.pmadd.wd"(@"llvm.x86.avx2.pmadd.ub.sw"(w.a, xs), @splat(1));
                },
            }
        }

        /// sum(w * x) of each row, exact; sum_x is the group's sum of quants.
        pub inline fn finish(acc: Acc, sum_x: i32) VI {
            return switch (prim) {
                .vnni512, .vnni256 => acc[0] + acc[1] - @as(VI, @splat(sum_x * correction(q))),
                .sdot128, .smull128 => if (nibbles)
                    acc[0] + acc[1] - @as(VI, @splat(sum_x * correction(q)))
                else
                    acc[0] + acc[1],
                .maddubs256 => if (q == .q5_0)
                    acc - @as(VI, @splat(sum_x * correction(q)))
                else if (nibbles)
                    @"llvm.x86.avx2.pmadd.wd"(acc, @splat(1)) - @as(VI, @splat(sum_x * correction(q)))
                else
                    acc,
            };
        }
    };
}

/// NT tokens against one panel: out[j][r] = row r . x_j for the 16 rows.
/// Per row and group: acc = fma(f32(sum(w * x)), d_w * d_x, acc), groups
/// left to right, the arithmetic of panelScalar whatever the vector width.
/// How far ahead, in bytes rounded up to whole records, the first token
/// block over a panel (the one that streams it from memory; panelTokens)
/// touches the panels (PREFETCHT0 over a record per record read, within
/// the call's panels), as `k_panels.zig`'s `prefetch_records` does for the K
/// records. A 512 MB matrix of 2,048 columns, Ice Lake, best of 3 runs of 3,
/// without -> with (8 KB ahead): 1 thread Q4_0 7.9 -> 9.7 GB/s, Q8_0 8.9 ->
/// 9.7, Q5_0 6.7 -> 9.0 (the load loop: 10.3); 2 threads 14.8 -> 18.1, 12.9
/// -> 16.2, 13.0 -> 17.3. 4 KB gained less, 16 KB the same.
const prefetch_ahead: usize = 8192;

/// Whether a one-token block streaming a panel prefetches ahead of its reads
/// (`stream`: `prefetch_ahead` here, `prefetch_records` in k_panels.zig),
/// or leaves it to the hardware prefetchers; the first block of several
/// tokens always prefetches. Each variant object holds its own copy;
/// `cf_set_panel_prefetch` (root.zig) sets every linked one, from the CPU
/// unless told. It paid on Intel (Ice Lake: the figures above) and cost on
/// AMD: Zen 4, Qwen2.5-Coder-1.5B Q4_K_M decode at 1 thread 12.6-14.9 tok/s
/// with it, 17.7-22.1 without. Several tokens gain from it there too: a
/// speculative check's rows cost 0.05 of a decode step with the prefetch,
/// 0.22 without (docs/KERNELS.md).
pub var panel_prefetch = std.atomic.Value(bool).init(true);

/// Where the first block of several tokens over a panel prefetches:
/// PREFETCHT0 (L1) or PREFETCHT1 (L2); K records (k_panels.zig) three records
/// ahead to L1 or two to L2, the group records `prefetch_ahead` bytes ahead
/// either way. Set with `panel_prefetch` (`cf_set_panel_prefetch`), from the
/// CPU's vendor: L2 on AMD, L1 elsewhere. Zen 4, `forwardAll` of k rows, 2
/// threads, best of 15-20 over 3-4 rounds, ms: Qwen2.5-Coder-1.5B Q4_K_M, k
/// = 2, 3, 4, 6, 8 rows 35.2, 40.1, 44.7, 52.5, 58.4 to L1, 33.4, 36.0, 39.2,
/// 48.2, 52.3 to L2 (one row: 30.5); the 1B geometry Q4_0, 16.4, 18.9, 22.1,
/// 27.8, 32.1 to L1, 16.2, 15.6, 18.3, 22.7, 29.5 to L2 (one row: 13.5). The
/// L1 setting was tuned on Ice Lake, where L2 was not measured.
pub var multi_prefetch_l2 = std.atomic.Value(bool).init(false);

/// The cache level a prefetch fills.
pub const PrefetchTo = enum { l1, l2 };

/// Touches (PREFETCHT0, line by line) the record of `rec` bytes `d` records
/// after the one at r, when it lies before `end` (the end of the panels the
/// call streams).
pub inline fn prefetchRecord(comptime rec: usize, comptime d: usize, r: [*]const u8, end: [*]const u8) void {
    prefetchPart(.l1, rec, d, 1, 0, r, end);
}

/// Part `part` of `parts` of prefetchRecord's lines: a kernel that spends
/// long on a record (several tokens) spreads the record's prefetches over
/// its steps instead of issuing them in one burst.
pub inline fn prefetchPart(comptime to: PrefetchTo, comptime rec: usize, comptime d: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (@intFromPtr(r) + (d + 1) * rec > @intFromPtr(end)) return;
    const ahead = r + d * rec;
    const lines = comptime std.math.divCeil(usize, rec, 64) catch unreachable;
    const locality: u2 = switch (to) {
        .l1 => 3,
        .l2 => 2,
    };
    comptime var line: usize = part * lines / parts;
    inline while (line < (part + 1) * lines / parts) : (line += 1) @prefetch(ahead + line * 64, .{ .rw = .read, .locality = locality, .cache = .data });
}

/// Part `part` of `parts` of the record ahead, for the first block of
/// several tokens over a panel: to L2 `d_l2` records ahead when `to_l2`
/// (`multi_prefetch_l2`), else to L1 `d_l1` records ahead.
pub inline fn prefetchSeveral(to_l2: bool, comptime rec: usize, comptime d_l1: usize, comptime d_l2: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (to_l2) {
        prefetchPart(.l2, rec, d_l2, parts, part, r, end);
    } else {
        prefetchPart(.l1, rec, d_l1, parts, part, r, end);
    }
}

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
    inline for (0..NT) |j| @memcpy(y[j * y_stride ..][0..valid], out[j][0..valid]);
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
