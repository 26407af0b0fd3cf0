#!/usr/bin/env python3
"""Generate tests/fixtures/tokenizer/corpus.json: the mixed text every tokenizer fixture encodes.

The corpus is a list of named chunks (each at most ~4 KB of UTF-8) and short edge strings:
prose in many scripts written for this corpus, source code taken from this repository (Apache-2.0,
like the rest of cflow), numbers, whitespace runs, emoji and ZWJ sequences, special-token
lookalikes for SmolLM2 and Gemma 3, and seeded random strings over many Unicode blocks. It holds
no lone surrogates, so every chunk is valid UTF-8 and means the same to Python, Node and Deno.

The committed corpus.json is the source of truth; the other tokenizer generators read it.

The file is run through `./dev fmt` (the repository's format check covers JSON).

Usage (standard library only):

    python3 tests/reference/gen_tokenizer_corpus.py
"""

from __future__ import annotations

import json
import random
import subprocess
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "tokenizer" / "corpus.json"
CHUNK_BYTES = 4000

PROSE = {
    "english": """The quick brown fox jumps over the lazy dog. It's a sentence you've seen before, and we'll see it again; they'd say it's the oldest trick in the book. I'M SHOUTING NOW, BUT IT'S FINE. Don't you think so? "Quoted text," she said -- and then: 'single quotes' too.
Tokenizers split text into pieces before they merge bytes into tokens. A byte-level BPE never fails: every byte has a token, so any string survives the round trip. A SentencePiece-style vocabulary replaces spaces with a visible marker and falls back to bytes only when a character is missing.
Mr. O'Neil's car -- a 1967 Ford Mustang -- cost $12,500.00 in 2003 (about 11,800 EUR at the time), or roughly 3.14159 times what he'd planned. Email him at oneil@example.com or call +1 (555) 010-9999 ext. 42.
Once upon a time, in a kingdom by the sea, there lived a programmer who counted tokens instead of sheep. Every night she tokenized the same sentence, and every night the numbers were the same, which was exactly the point.
""",
    "german": """Größere Übungen für Äpfel und Öl: Die Straße führt über die Brücke nach Köln. Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Ich hätte gern ein Stück Käsekuchen, aber nur, wenn's nicht zu süß ist.
Donaudampfschifffahrtsgesellschaftskapitänsmütze ist ein langes Wort; Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz war noch länger.
""",
    "french": """L'été dernier, nous sommes allés à la plage près de Nice. « Où est la bibliothèque ? » demanda-t-il. Ça coûte 15,50 € — c'est-à-dire presque rien. Les œufs, le cœur et l'âme ; Noël à Besançon.
Portez ce vieux whisky au juge blond qui fume. Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en canoë au delà des îles.
""",
    "spanish": """El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro. ¿Dónde está la estación? ¡Qué sorpresa! Mañana será otro día, señor Muñoz.
Los niños jugaban en el patio mientras la abuela preparaba churros con chocolate.
""",
    "portuguese_polish_turkish": """Não há nada como um café às três da tarde; à noite, a cidade de São Paulo ilumina-se.
Zażółć gęślą jaźń. Pchnąć w tę łódź jeża lub ośm skrzyń fig. W Szczebrzeszynie chrząszcz brzmi w trzcinie.
Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul'da ılık bir akşam; Ağrı Dağı'nın eteklerinde çiçekler açmış.
Tiếng Việt có nhiều dấu: Trăm năm trong cõi người ta, chữ tài chữ mệnh khéo là ghét nhau. Người Việt Nam ăn phở vào buổi sáng.
""",
    "russian": """Съешь же ещё этих мягких французских булок, да выпей чаю. В чащах юга жил бы цитрус? Да, но фальшивый экземпляр!
Москва — столица России. Вчера шёл дождь, а сегодня светит солнце; температура +23 °C. «Привет, как дела?» — спросила Наташа. Её брат ответил: «Всё хорошо, спасибо».
Лев Николаевич Толстой написал роман «Война и мир» в 1863–1869 годах. Программисты часто говорят: «Работает — не трогай».
""",
    "ukrainian_bulgarian_serbian": """Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів! Жебракують філософи при ґанку церкви в Гадячі, ще й шатро їхнє п'яне знаємо.
Ах, чудна българска земьо, полюшвай цъфтящи жита. Љубазни фењерџија чађавог лица хоће да ми покаже штос.
""",
    "greek": """Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Η Αθήνα είναι η πρωτεύουσα της Ελλάδας· ο Παρθενώνας δεσπόζει στην Ακρόπολη. Γειά σου, κόσμε! Τι κάνεις; Μια φορά κι έναν καιρό ζούσε ένας βασιλιάς.
""",
    "arabic": """صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت — يَحظى الضَجيعُ بِها نَجلاءَ مِعطارِ.
اللغة العربية هي إحدى أكثر اللغات انتشاراً في العالم، ويتحدثها أكثر من ٤٠٠ مليون شخص. مرحباً بكم في مدينة القاهرة! كم الساعة الآن؟ إنها الثالثة والنصف.
كتب الطالب ١٢٣ صفحة في عام ٢٠٢٤، ثم قال: «الحمد لله».
""",
    "hebrew_persian_urdu": """דג סקרן שט בים מאוכזב ולפתע מצא חברה. שלום עולם! ירושלים היא עיר עתיקה.
فارسی زبانی است که در ایران، افغانستان و تاجیکستان صحبت می‌شود. می‌خواهم یک فنجان چای بنوشم.
اردو ایک خوبصورت زبان ہے۔ پاکستان کا دارالحکومت اسلام آباد ہے۔
""",
    "hindi_bengali_tamil": """ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम, अयोध्या के महाराज दशरथ के बड़े सपुत्र थे।
भारत एक विशाल देश है। यहाँ अनेक भाषाएँ बोली जाती हैं। नमस्ते, आप कैसे हैं? मेरा नाम राहुल है और मैं दिल्ली में रहता हूँ। १२३४५ रुपये।
আমি বাংলায় গান গাই। কলকাতা একটি বড় শহর। தமிழ் ஒரு பழமையான மொழி. சென்னை ஒரு பெரிய நகரம்.
""",
    "chinese": """我能吞下玻璃而不伤身体。天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。
北京是中华人民共和国的首都，也是全国的政治和文化中心。今天天气很好，我们去公园散步吧！你吃饭了吗？
人工智能（AI）正在改变世界：从语音识别到机器翻译，再到自动驾驶。大语言模型的分词器把文本切成小块，然后转换成数字。
繁體中文：臺灣的夜市很熱鬧，滷肉飯和珍珠奶茶都很好吃。學習語言需要時間與耐心。
""",
    "japanese": """いろはにほへと ちりぬるを わかよたれそ つねならむ うゐのおくやま けふこえて あさきゆめみし ゑひもせす。
私はガラスを食べられます。それは私を傷つけません。東京は日本の首都です。今日はいい天気ですね！
カタカナとひらがなと漢字を混ぜて書くのが日本語の特徴です。ｶﾀｶﾅの半角もあります。コンピューターでトークン化をテストしています。
""",
    "korean": """다람쥐 헌 쳇바퀴에 타고파. 키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다.
서울은 대한민국의 수도입니다. 안녕하세요, 만나서 반갑습니다! 오늘 날씨가 정말 좋네요. 한국어는 한글로 씁니다.
""",
    "thai_georgian_armenian_amharic": """เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย
ქართული ენა ერთ-ერთი უძველესი ენაა. Հայերենը հնդեվրոպական լեզու է։ ሰላም ለዓለም! አማርኛ በኢትዮጵያ ይነገራል።
""",
}

EMOJI_BASE = [
    "😀", "😂", "🥲", "🤖", "🦊", "🐍", "🚀", "🌍", "🔥", "✨", "❤️", "👍", "👋", "🙏", "💡", "📦", "🧪", "🎉",
]
SKIN = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
ZWJ = "\u200d"
ZWJ_SEQS = [
    "👨" + ZWJ + "👩" + ZWJ + "👧" + ZWJ + "👦",
    "👩" + ZWJ + "💻",
    "🧑" + "\U0001F3FD" + ZWJ + "🚀",
    "🏳️" + ZWJ + "🌈",
    "🏴" + ZWJ + "☠️",
    "🤷" + "\U0001F3FD" + ZWJ + "♀️",
    "👁️" + ZWJ + "🗨️",
    "❤️" + ZWJ + "🔥",
    "🐻" + ZWJ + "❄️",
]
FLAGS = ["🇺🇸", "🇩🇪", "🇯🇵", "🇧🇷", "🇮🇳", "🇺🇦", "🇪🇺"]
KEYCAPS = ["1️⃣", "#️⃣", "*️⃣", "🔟"]

SPECIAL_LOOKALIKES = """<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
4<|im_end|>
<|endoftext|><|endoftext|> <|im_start|><|im_end|> <|im_start|
<|im_sta rt|> <|IM_START|> <<|im_start|>> <|im_start|>>< |im_end|> <repo_name>cflow<file_sep>a.ts<filename>
<issue_start>bug<issue_comment>fixed<issue_closed> <jupyter_start><jupyter_text>hi<jupyter_code>x=1<jupyter_output>1<empty_output>
<bos><start_of_turn>user
Write a poem about tokens.<end_of_turn>
<start_of_turn>model
Tokens, tokens everywhere.<end_of_turn>
<eos><eos> <pad><unk><mask> [multimodal] <unused0><unused12><unused6241> <unused6242> <start_of_image>
<eos <bos> > <<eos>> <0x41><0xFF> <0x4> </s><s> [INST] hi [/INST] <|eot_id|><|begin_of_text|>
\u2581\u2581hello \u2581world\u2581 <s>\u2581</s>
"""

WHITESPACE = [
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n", "\n ", " \t ",
    "\u00a0", "\u2002", "\u2003", "\u2009", "\u200a", "\u202f", "\u205f", "\u3000", "\u1680", "\u2028",
    "\u2029", "\u0085", "\u000b", "\u000c", "\u200b", "\ufeff",
]

EDGE = [
    "", " ", "  ", "\n", "\t", " \n ", "a", "A", "'s", "'S", "'ll", "'LL", "I'M", "we'Re", "x'y", "'",
    "''", "\"\"", "Hello", " Hello", "  Hello", "Hello ", "Hello  ", "hello world", "Hello, world!",
    "<|im_start|>", "<|im_start|>user\n", "<|im_start|><|im_end|>", "<<|im_start|>>", "<eos>", "<eos><eos>",
    "<bos>", " <bos>", "<start_of_turn>", "[multimodal]", "<unused0>", "<0x41>", "\u00a0", "\u3000",
    "\u2028", "\u0085", "\ufeff", "\u200d", "🤷🏽\u200d♀️", "👨\u200d👩\u200d👧\u200d👦", "🇺🇦", "1", "12",
    "123", "1234", "12345", "1234567890", " 1", "  12", "3.14", "1,000", "-1", "1e-5", "0x1F", "١٢٣",
    "१२३", "Ⅻ", "½", "x²", "ﬁ", "e\u0301", "é", "Å", "\u212b", "ẛ\u0323", "▁", "▁▁hello", "\u2581",
    "\n" * 40, " " * 40, "\t" * 9, " \t \t\n", "\r\n\r\n", "a\rb", "a\u000bb", "a\u000cb", "$", "$$$",
    "+=", "<=>", "^~|", "!!!", "...", "…", "—", "«»", "「」", "中", "中文", "日本語", "한국어", "ไทย",
    "עברית", "العربية", "हिन्दी", "Ελληνικά", "Кириллица", "\u0000", "a\u0000b", "\u007f", "\u0001\u0002",
    "\ue000", "\U000f0000", "\U0010fffd", "\ufffd", "\ufffe", "\U0001d400\U0001d401", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "the", "The", "THE", " the", "ing", "tion", "\u0301", "a\u0301\u0302\u0303", "ﷺ", "Ꙩ", "ǅ",
    "the cat sat [MASK] on a dog<sep> catalog dogma cat. [MASK]  <sep>  x", "cat", " cat ", "dog",
    "<|begin_of_text|>hi<|eot_id|>", "<s> a </s>", "  leading", "trailing  ", "tab\tand\u00a0nbsp",
]


def repo_code() -> list[tuple[str, str]]:
    files = [
        "formats/errors.ts", "formats/byte_source.ts", "formats/gguf/get_value.ts", "ffi/loader.ts",
        "kernels-zig/src/cpu.zig", "kernels-zig/build.zig", "scripts/fetch-models.sh", "dev",
        "tests/reference/gen_hf_config_cases.py", "cli/main.ts", "docs/ARCHITECTURE.md",
    ]
    out = []
    for f in files:
        p = ROOT / f
        if p.exists():
            out.append((f"code:{f}", p.read_text(encoding="utf-8")[:9000]))
    return out


def numbers(rng: random.Random) -> str:
    parts = []
    for _ in range(260):
        k = rng.randrange(9)
        if k == 0:
            parts.append(str(rng.randrange(10 ** rng.randrange(1, 13))))
        elif k == 1:
            parts.append(f"{rng.uniform(-1e4, 1e4):.{rng.randrange(0, 7)}f}")
        elif k == 2:
            parts.append(f"{rng.randrange(1, 10**9):,}")
        elif k == 3:
            parts.append(f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}")
        elif k == 4:
            parts.append(hex(rng.randrange(2**32)))
        elif k == 5:
            parts.append(f"{rng.random():.3e}")
        elif k == 6:
            parts.append(f"v{rng.randrange(10)}.{rng.randrange(30)}.{rng.randrange(100)}")
        elif k == 7:
            parts.append(f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}")
        else:
            parts.append("".join(rng.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９¼½¾²³ⅠⅡⅢ") for _ in range(rng.randrange(1, 6))))
    seps = [" ", ", ", "; ", "\n", " + ", " = ", "\t", "  ", "/", "x"]
    return "".join(p + rng.choice(seps) for p in parts)


def whitespace_text(rng: random.Random) -> str:
    words = ["alpha", "beta", "gamma", "δέλτα", "эпсилон", "ζ", "中", "x", "1", "!", "::", "'s"]
    out = []
    for _ in range(500):
        out.append(rng.choice(words))
        out.append("".join(rng.choice(WHITESPACE) for _ in range(rng.choice([1, 1, 1, 2, 3, 5, 9]))))
    return "".join(out)


def emoji_text(rng: random.Random) -> str:
    out = []
    for _ in range(420):
        k = rng.randrange(6)
        if k == 0:
            out.append(rng.choice(EMOJI_BASE))
        elif k == 1:
            out.append(rng.choice(["👋", "👍", "🙏", "💪", "🤷"]) + rng.choice(SKIN))
        elif k == 2:
            out.append(rng.choice(ZWJ_SEQS))
        elif k == 3:
            out.append(rng.choice(FLAGS))
        elif k == 4:
            out.append(rng.choice(KEYCAPS))
        else:
            out.append(rng.choice(["ok", "yes!", "lol", "Hi", "nice", "ты", "好"]))
        out.append(rng.choice(["", " ", " ", "\n", ", "]))
    return "".join(out)


BLOCKS = [
    (0x0020, 0x007E), (0x00A0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0590, 0x05FF),
    (0x0600, 0x06FF), (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x1100, 0x11FF), (0x2000, 0x206F),
    (0x2190, 0x23FF), (0x2500, 0x27BF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xF900, 0xFAFF), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF),
    (0x20000, 0x2A6DF), (0x0300, 0x036F),
]


def random_text(rng: random.Random, n: int) -> str:
    out = []
    while len(out) < n:
        lo, hi = rng.choice(BLOCKS)
        for _ in range(rng.randrange(1, 12)):
            c = rng.randrange(lo, hi + 1)
            if 0xD800 <= c <= 0xDFFF:
                continue
            out.append(chr(c))
        if rng.random() < 0.3:
            out.append(rng.choice([" ", "  ", "\n", "\t", "'s", "1", "2023", "<", ">", "|"]))
    return "".join(out)


def normalization_text() -> str:
    words = ["café", "naïve", "Ångström", "Œuvre", "ﬁnance", "Ｆｕｌｌ", "㍿", "①②③", "ℌ𝔢𝔩𝔩𝔬", "한글", "가각",
             "é", "ñ", "ü", "ő", "ệ", "ǖ"]
    out = []
    for w in words:
        for form in ["NFC", "NFD", "NFKC", "NFKD"]:
            out.append(unicodedata.normalize(form, w))
    return " ".join(out) + "\n"


def chunks_of(name: str, text: str) -> list[dict]:
    out, cur, n, idx = [], [], 0, 0
    for line in text.splitlines(keepends=True):
        b = len(line.encode("utf-8"))
        if cur and n + b > CHUNK_BYTES:
            out.append({"name": f"{name}#{idx}", "text": "".join(cur)})
            idx, cur, n = idx + 1, [], 0
        # a single line longer than a chunk is cut at character boundaries
        while b > CHUNK_BYTES:
            cut, acc = 0, 0
            for i, ch in enumerate(line):
                acc += len(ch.encode("utf-8"))
                if acc > CHUNK_BYTES:
                    cut = i
                    break
            out.append({"name": f"{name}#{idx}", "text": line[:cut]})
            idx += 1
            line = line[cut:]
            b = len(line.encode("utf-8"))
        cur.append(line)
        n += b
    if cur:
        out.append({"name": f"{name}#{idx}", "text": "".join(cur)})
    return out


def main() -> None:
    rng = random.Random(20250511)
    chunks: list[dict] = []
    for name, text in PROSE.items():
        chunks += chunks_of(f"prose:{name}", text)
    chunks += chunks_of("prose:all", "\n".join(PROSE.values()))
    for name, text in repo_code():
        chunks += chunks_of(name, text)
    chunks += chunks_of("numbers", numbers(rng))
    chunks += chunks_of("whitespace", whitespace_text(rng))
    chunks += chunks_of("emoji", emoji_text(rng))
    chunks += chunks_of("special", SPECIAL_LOOKALIKES * 3)
    chunks += chunks_of("normalization", normalization_text() * 3)
    for i in range(8):
        chunks += chunks_of(f"random{i}", random_text(rng, 1100))
    mixed = [c["text"] for c in rng.sample(chunks, 12)]
    chunks += chunks_of("mixed", "".join(mixed)[:12000])
    for c in chunks:
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in c["text"])
    edges = [{"name": f"edge{i}", "text": t} for i, t in enumerate(EDGE)]
    total = sum(len(c["text"].encode("utf-8")) for c in chunks + edges)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"bytes": total, "chunks": chunks + edges}, ensure_ascii=False, indent=0) + "\n",
        encoding="utf-8",
    )
    subprocess.run([str(ROOT / "dev"), "fmt", str(OUT)], cwd=ROOT, check=True)
    print(f"{OUT}: {len(chunks)} chunks and {len(edges)} edge strings, {total} bytes of UTF-8")


if __name__ == "__main__":
    main()
