// Loads training/out/tokenizer.json with cflow's own loader and checks that it gives the ids the
// Python `tokenizers` library gave (training/out/tokenizer_check.json, written by
// training/check_tokenizer.py) and round-trips every sentence.
//   ./dev run --allow-read training/check_tokenizer.ts [training/out]
import { tokenizerFromHfJson } from "../tokenizer/tokenizer_from_hf_json.ts";

const dir = Deno.args[0] ?? "training/out";
const tok = tokenizerFromHfJson(await Deno.readTextFile(`${dir}/tokenizer.json`));
const check = JSON.parse(await Deno.readTextFile(`${dir}/tokenizer_check.json`)) as {
  cases: { text: string; ids: number[] }[];
};
let bad = 0;
for (const c of check.cases) {
  const ids = tok.encode(c.text, { parseSpecial: true });
  const back = tok.decode(ids);
  const same = ids.length === c.ids.length && ids.every((v, i) => v === c.ids[i]);
  if (!same || back !== c.text) {
    bad++;
    console.log(
      `MISMATCH ${JSON.stringify(c.text.slice(0, 80))}: same ids ${same}, round trip ${
        back === c.text
      }`,
    );
  }
}
console.log(`vocab ${tok.vocabSize}, eot ${tok.encode("<|endoftext|>", { parseSpecial: true })}`);
console.log(
  `${
    check.cases.length - bad
  }/${check.cases.length} cases: ids equal to tokenizers' and round trip exact`,
);
if (bad > 0) Deno.exit(1);
