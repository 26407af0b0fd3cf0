//! The dot-product primitives of the packed panel kernels (`panels.zig`):
//! how each variant computes a 32-column group of panel rows
//! (`PanelPrim`), and the exact integer dot products of one group with one
//! token's Q8_0 activation on it (`PanelDot`), corrected for the unsigned
//! weights of each quant type (`correction`). panels.zig re-exports
//! `PanelPrim`.
//!
//! Compiled once per variant with `kernels.zig` (the same module).

const k = @import("kernels.zig");
const packing = @import("packing.zig");

const readU32 = k.readU32;
const V8i32 = @Vector(8, i32);
const V16i16 = @Vector(16, i16);
const @"llvm.aarch64.neon.sdot.v4i32.v16i8" = k.@"llvm.aarch64.neon.sdot.v4i32.v16i8";
const @"llvm.x86.avx2.psign.b" = k.@"llvm.x86.avx2.psign.b";
const @"llvm.x86.avx2.pmadd.ub.sw" = k.@"llvm.x86.avx2.pmadd.ub.sw";
const @"llvm.x86.avx2.pmadd.wd" = k.@"llvm.x86.avx2.pmadd.wd";
const @"llvm.x86.avx512.vpdpbusd.256" = k.@"llvm.x86.avx512.vpdpbusd.256";
const @"llvm.x86.avx512.vpdpbusd.512" = k.@"llvm.x86.avx512.vpdpbusd.512";

pub fn correction(comptime q: packing.Quant) i32 {
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
pub fn PanelDot(comptime prim: PanelPrim, comptime q: packing.Quant) type {
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
