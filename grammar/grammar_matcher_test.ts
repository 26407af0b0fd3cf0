/**
 * The GBNF parser, compiler and byte-level matcher: syntax, escapes, classes, repetition
 * bounds, refusals with positions, recursion, UTF-8 characters split over calls, bounds on
 * state; property tests against JavaScript's RegExp for grammars that are regular.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  compileGrammar,
  GBNF_LIMITS,
  GrammarError,
  GrammarMatcher,
  MAX_STACK_DEPTH,
  parseGbnf,
} from "./mod.ts";

const enc = new TextEncoder();

/** Whether `text` is a complete match of `gbnf`. */
function accepts(gbnf: string, text: string | Uint8Array): boolean {
  const m = GrammarMatcher.fromGbnf(gbnf);
  return m.advance(typeof text === "string" ? enc.encode(text) : text) && m.isAccepting();
}

function refused(gbnf: string, re: RegExp, line?: number, column?: number): void {
  assert.throws(() => compileGrammar(gbnf), (e: unknown) => {
    assert.ok(e instanceof GrammarError, String(e));
    assert.match(e.message, re);
    if (line !== undefined) assert.equal(e.line, line);
    if (column !== undefined) assert.equal(e.column, column);
    return true;
  });
}

Deno.test("GBNF: literals with every escape, classes, negation, '.', groups, comments", () => {
  const g = String.raw`root ::= "a\n\t\"\\" [\x41-\x43] "\u00e9" "\U0001F600" [^0-9] . # comment
  ( "x" | "y" )`;
  assert.ok(accepts(g, 'a\n\t"\\Bé😀zQx'));
  assert.ok(accepts(g, 'a\n\t"\\Cé😀-\ny'));
  assert.ok(!accepts(g, 'a\n\t"\\Dé😀zQx'));
  assert.ok(!accepts(g, 'a\n\t"\\Bé😀5Qx'));
  // Rules on several lines, continued by indentation or inside groups.
  const multi = `root ::= item
  ("," item)*
item ::= (
  "a" |
  "b"
)`;
  assert.ok(accepts(multi, "a,b,a"));
  assert.deepEqual([...parseGbnf(multi).rules.keys()], ["root", "item"]);
});

Deno.test("GBNF: repetition * + ? {m} {m,} {m,n} holds its bounds", () => {
  const cases: [string, string[], string[]][] = [
    ['root ::= "a"*', ["", "a", "aaaa"], ["b"]],
    ['root ::= "a"+', ["a", "aaa"], [""]],
    ['root ::= "a"?', ["", "a"], ["aa"]],
    ['root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]],
    ['root ::= "a"{2,}', ["aa", "aaaaaaa"], ["a"]],
    ['root ::= "a"{1,3}', ["a", "aa", "aaa"], ["", "aaaa"]],
    ['root ::= ("ab" | "c"){0,2} "d"', ["d", "abd", "cabd", "ccd"], ["cccd", "abab"]],
    ["root ::= [0-9]{ 2 , 4 }", ["12", "1234"], ["1", "12345"]],
  ];
  for (const [g, yes, no] of cases) {
    for (const s of yes) assert.ok(accepts(g, s), `${g} should accept ${JSON.stringify(s)}`);
    for (const s of no) assert.ok(!accepts(g, s), `${g} should refuse ${JSON.stringify(s)}`);
  }
});

Deno.test("GBNF: mistakes are GrammarErrors with line and column", () => {
  refused("root ::= foo", /undefined rule 'foo'/, 1, 10);
  refused('item ::= "a"', /no 'root' rule/, 0, 0);
  refused('root ::= "a"\nroot ::= "b"', /defined twice/, 2, 1);
  refused('root ::= "abc', /unterminated string/, 1, 10);
  refused("root ::= [a-", /unterminated character class/);
  refused('root ::= "a"{3,2}', /max < min/);
  refused(`root ::= "a"{${GBNF_LIMITS.maxRepetition + 1}}`, /repetition bound/);
  refused('root ::= "\\q"', /unknown escape/);
  refused('root ::= "\\uD800"', /not a Unicode scalar value/);
  refused('root ::= ("a"', /expected '\)'/);
  refused('root = "a"', /expected '::='/);
  refused("root ::= [z-a]", /out of order/);
  // Left recursion, direct, indirect, through a nullable prefix, and an empty repetition.
  refused('root ::= root "a" | "b"', /'root' is left-recursive/, 1, 1);
  refused('root ::= a\na ::= b "x"\nb ::= a | "y"', /left-recursive/);
  refused('root ::= e\ne ::= "x"? e "y" | "z"', /'e' is left-recursive/, 2, 1);
  refused('root ::= ("a"?)*', /left-recursive/);
  // Bounds: length, rules, nesting, expansion.
  refused("root ::= " + '"a" '.repeat(70_000), /characters long/);
  refused("root ::= " + "(".repeat(70) + '"a"' + ")".repeat(70), /nested deeper/);
  refused(
    Array.from({ length: 4100 }, (_, i) => `r${i} ::= "a"`).join("\n") + "\nroot ::= r0",
    /more than 4096 rules/,
  );
  refused('root ::= (("a"{1000}){1000}){1000}', /expands to more than/);
});

Deno.test("matcher: recursion (nested parentheses), isAccepting and canContinue", () => {
  const g = 'root ::= expr\nexpr ::= "(" expr ")" | "x"';
  const m = GrammarMatcher.fromGbnf(g);
  assert.ok(m.advance(enc.encode("((")));
  assert.ok(!m.isAccepting() && m.canContinue());
  const at = m.clone();
  assert.ok(m.advance(enc.encode("x))")));
  assert.ok(m.isAccepting() && !m.canContinue());
  assert.ok(!m.advance(enc.encode(")")), "a refused byte leaves the matcher as it was");
  assert.ok(m.isAccepting());
  assert.ok(!at.isAccepting() && at.advance(enc.encode("x")), "the clone kept its state");
  // Deeper than the stack bound is not followed (and nothing hangs).
  const deep = GrammarMatcher.fromGbnf(g);
  assert.ok(!deep.advance(enc.encode("(".repeat(MAX_STACK_DEPTH + 5))));
});

Deno.test("matcher: a UTF-8 character split over calls, partial states checked early", () => {
  const g = 'root ::= [é中] "!" | "😀"';
  const bytes = enc.encode("中!");
  const m = GrammarMatcher.fromGbnf(g);
  assert.ok(m.advance(bytes.slice(0, 1)));
  assert.ok(!m.isAccepting() && m.canContinue(), "in the middle of a character");
  assert.ok(m.advance(bytes.slice(1, 2)));
  assert.ok(m.advance(bytes.slice(2)));
  assert.ok(m.isAccepting());
  const emoji = enc.encode("😀");
  const e = GrammarMatcher.fromGbnf(g);
  for (const b of emoji) assert.ok(e.advance(new Uint8Array([b])));
  assert.ok(e.isAccepting());
  // A lead byte whose characters cannot match is refused at once.
  assert.ok(!GrammarMatcher.fromGbnf(g).advance(enc.encode("ж").slice(0, 1)));
  // Invalid UTF-8: a lone continuation byte, an overlong form, a surrogate.
  for (const bad of [[0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
    assert.ok(!GrammarMatcher.fromGbnf("root ::= .*").advance(new Uint8Array(bad)));
  }
});

Deno.test("matcher: an explosively ambiguous grammar is refused, not followed", () => {
  // After n x's the pending closers are any sequence of y and z: 2^n parse stacks.
  const g = 'root ::= s\ns ::= "x" s | "x" s "y" | "x" s "z" | ""';
  const m = GrammarMatcher.fromGbnf(g);
  assert.ok(m.clone().advance(enc.encode("xxxxzy")));
  assert.throws(() => m.advance(enc.encode("x".repeat(12))), /too ambiguous: more than 1024/);
});

Deno.test("property: regular grammars agree with RegExp on random strings", () => {
  const cases: [string, RegExp][] = [
    ['root ::= ("ab" | "a")* "b"', /^(ab|a)*b$/],
    ['root ::= [a-c]{1,3} ("-" [0-9]+)?', /^[a-c]{1,3}(-[0-9]+)?$/],
    ['root ::= ([^b] | "bb")+', /^([^b]|bb)+$/u],
    ['root ::= "x"{2,4} | "y"*', /^(x{2,4}|y*)$/],
  ];
  for (const [g, re] of cases) {
    const m0 = GrammarMatcher.fromGbnf(g);
    fc.assert(
      fc.property(fc.stringMatching(/^[abcxy0-9é-]{0,8}$/), (s) => {
        const m = m0.clone();
        const ok = m.advance(enc.encode(s)) && m.isAccepting();
        return ok === re.test(s);
      }),
      { seed: 42, numRuns: 400 },
    );
  }
});

Deno.test("property: hostile grammar text is a GrammarError or a grammar, and matching it stays bounded", () => {
  const piece = fc.constantFrom(
    "root ::= ",
    "x ::= ",
    "\n",
    " ",
    '"a"',
    '"\\x41"',
    "[a-c]",
    "[^b]",
    ".",
    "(",
    ")",
    "|",
    "*",
    "+",
    "?",
    "{2}",
    "{1,3}",
    "{0,}",
    "x",
    "root",
    "# c\n",
    '"',
    "[",
    "\\",
    "::=",
    "{",
    "}",
  );
  fc.assert(
    fc.property(
      fc.array(piece, { maxLength: 24 }),
      fc.uint8Array({ maxLength: 16 }),
      (parts, bytes) => {
        const text = parts.join("");
        let m: GrammarMatcher;
        try {
          m = GrammarMatcher.fromGbnf(text);
        } catch (e) {
          return e instanceof GrammarError;
        }
        try {
          for (const b of bytes) m.advance(new Uint8Array([b]));
          m.advance(enc.encode("aaab"));
        } catch (e) {
          return e instanceof GrammarError && /too ambiguous/.test(e.message);
        }
        return typeof m.isAccepting() === "boolean";
      },
    ),
    { seed: 99, numRuns: 3000 },
  );
});
