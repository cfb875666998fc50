"""The poisoning guard: a scanner for instruction-shaped text in memory.

Memory poisoning is attacker text that is stored as a memory and later re-read by the model as
if it were an instruction. Ordinary memories are statements about the world ("Ana lives in
Lisbon"); poison is addressed to the model ("ignore all previous instructions", a fake
``system:`` header, a tool call, "send the data to this URL", "your persona is now ...").
``scan`` looks for those shapes with fixed rules and, where no rule fires, with a small learned
scorer (``learned``: logistic regression over hashed n-grams, weights in ``data/guard_scorer.npz``),
in the text and in every decoded view of it (base64, escapes, reversed, leetspeak, ...; see
``pagefault.safety.decoders``). It runs offline, is deterministic and explains each flag by rule name.

It is a tripwire, not a proof: a paraphrase unlike anything the rules and the scorer were built
from gets through. Detection and false-positive rates on held-out corpora are measured by
``benchmarks/injection.py``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Iterator, NamedTuple

import numpy as np

from pagefault.safety import decoders as decoded
from pagefault.safety.decoders import decoded_views
from pagefault.safety.literals import required_literal_sets, required_literals
from pagefault.safety.policy import GUARD_MODES

#: What the guard does with flagged memory: nothing, mark it untrusted, or hide it from search.
EXCERPT_CHARS = 80
#: Characters of a text the scanner reads. Memory records are shorter (archival holds at most 20,000)
#: and retrieval scans what is shown to the model, so this only bounds the cost of odd API calls.
MAX_SCAN_CHARS = 100_000

_W = r"(?:\W+\w+){0,%d}?\W+"  # up to N intervening words


def _any(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


# -- vocabulary -------------------------------------------------------------------------------
_IGNORE = _any(
    r"ignor\w*", r"disregard\w*", r"forget\w*", r"bypass\w*", r"overrid\w*", r"skip",
    r"set aside", r"pay no attention to", r"do ?n[o']t (?:follow|obey)", r"stop (?:following|obeying)",
    r"no longer (?:follow|obey)", r"abandon\w*", r"discard\w*", r"never ?mind", r"throw (?:out|away)", r"scrap",
    r"do ?n[o']t (?:listen to|pay attention to|heed)", r"stop listening to", r"neglect", r"drop", r"overlook\w*",
    # de, fr, es, it
    r"vergiss\w*", r"vergessen", r"missachte\w*", r"oubli\w*", r"olvid\w*", r"dimentica\w*",
    r"non (?:seguire|rispettare)",
)
_INSTRUCTIONS = _any(
    r"instructions?", r"directions", r"directives?", r"guidelines", r"guidance", r"prompts?", r"programming",
    r"system (?:message|prompt)s?", r"commands", r"orders", r"constraints", r"guardrails", r"policies",
    r"safety (?:rules|checks|filters|measures)", r"restrictions", r"(?:your|the above|these) rules",
    r"(?:previous|prior|above|earlier|original|current) (?:rules|task|assignment|goal|objective|role|context)",
    r"your (?:task|assignment|goal|objective|role|training)",
    r"(?:previous|prior|earlier|original|default|safety|security|your) (?:settings|configuration|config|parameters)",
    r"regeln", r"r[eè]gles", r"reglas", r"regole",
    # de, fr, es, it
    r"anweisungen", r"instruktionen", r"befehle", r"richtlinien", r"vorgaben", r"consignes", r"directives",
    r"instrucciones", r"indicaciones", r"istruzioni", r"direttive",
)
#: Words that may stand between "ignore" and "instructions" ("ignore all of your previous system
#: instructions"); arbitrary words may not, so "he forgot his instructions" is not an override.
_EARLIER = _any(
    r"previous\w*", r"prior", r"above", r"earlier", r"preceding", r"foregoing", r"former", r"original",
    r"initial", r"existing", r"following", r"future", r"subsequent", r"all", r"any", r"every", r"your",
    r"these", r"those", r"other", r"developer", r"system", r"safety", r"user", r"the", r"of", r"and", r"my", r"its",
    r"above-mentioned", r"aforementioned", r"given", r"old", r"last", r"current", r"standing", r"default",
    r"programmed", r"hidden", r"security", r"content", r"ethical", r"moral", r"core", r"base", r"built-in",
    # de, fr, es, it
    r"sie", r"alle", r"die", r"deine", r"ihre", r"bisherigen", r"vorherigen", r"obigen", r"vorigen", r"toutes?", r"les",
    r"tes", r"vos", r"todas?", r"las", r"los", r"tus", r"sus", r"tutte", r"le", r"tue", r"gli", r"i tuoi",
)
_MODEL = _any(r"ai", r"a\.i\.", r"llm", r"bot", r"chatbot", r"assistant", r"model", r"language model", r"agent",
              r"chatgpt", r"gpt", r"claude", r"copilot", r"gemini")
#: Words that name an AI reader and little else (not "agent" or "model": travel agents, model trains).
_AI = _any(r"ai", r"a\.i\.", r"llms?", r"language models?", r"chat ?bots?", r"ai (?:assistant|agent|model|system)s?",
           r"(?:automated|autonomous) (?:agents?|assistants?|systems?|tools?|readers?)", r"ai agents?", r"gpt", r"chatgpt",
           r"claude", r"copilot", r"gemini", r"the assistant", r"assistants", r"agents", r"coding agents?")
_SECRETS = _any(r"api[ _-]?keys?", r"passwords?", r"credentials", r"secrets?", r"tokens?", r"environment variables",
                r"env(?:ironment)? vars", r"private keys?", r"ssh keys?", r"credit card",
                r"(?:activation|license|licence|product|serial|cd|windows|secret|access|signing) keys?")
_DATA = _any(r"data", r"database", r"records?", r"emails?", r"history", r"conversations?", r"chat log", r"messages",
             r"memory", r"memories", r"contacts", r"customer \w+", r"user(?:'s)? \w+", r"files?", r"summary", r"context",
             r"everything", r"transcript", r"(?:kunden)?daten", r"verlauf", r"historique", r"donn[ée]es", r"datos",
             r"historial", r"cronologia", r"dati", _SECRETS)
_HIDDEN = _any(
    r"system ?prompt", r"system (?:message|instructions)", r"hidden (?:prompt|instructions|message|text|rules)",
    r"initial (?:instructions|prompt)", r"developer (?:message|prompt|instructions)", r"context window",
    r"(?:your|the|base|original) (?:instructions|prompt|rules|configuration)", r"pre-?prompt",
    # de, fr, es, it
    r"system-?prompt", r"systemanweisungen", r"prompt (?:de |del )?sist[eè]m[ae]", r"prompt syst[eè]me",
    r"instrucciones del sistema", r"istruzioni di sistema", r"consignes syst[eè]me",
)
_REVEAL = _any(
    r"reveal", r"show", r"print", r"output", r"repeat", r"disclose", r"dump", r"leak", r"display", r"echo",
    r"tell me", r"list", r"write out", r"recite", r"translate", r"give me", r"read (?:me|out)", r"include", r"paste",
    r"copy", r"insert", r"put", r"summari[sz]e", r"describe", r"explain", r"paraphrase", r"spell out", r"enumerate",
    r"verrate?", r"zeige?", r"gib", r"r[ée]v[ée]le[zr]?", r"montre[zr]?", r"affiche[zr]?", r"rivela", r"mostra",
    r"revela", r"muestra",
)
_SEND = _any(r"send", r"e-?mail", r"forward", r"post", r"upload", r"transmit", r"exfiltrate", r"leak", r"submit",
             r"copy", r"sync", r"report", r"deliver", r"beam", r"push", r"share", r"mail",
             r"sende", r"schick", r"envoie", r"envoy", r"env[ií]a", r"invia", r"manda", r"inoltra", r"reenv[ií]a", r"leite")
_DEST = r"(?:[\w.+-]+@[\w-]+\.[\w.-]+|https?://|www\.|\bftp://|\bwebhook)"
_REPLY = _any(r"summary", r"summaries", r"responses?", r"repl(?:y|ies)", r"answers?", r"outputs?", r"messages?",
              r"message")

#: "Drop your instructions" in more languages (see the override rule); NFKC-normalized like the
#: text it is matched against (Thai's sara am, for one, is split in two by NFKC).
_OVERRIDE_MORE = unicodedata.normalize("NFKC", "|".join((
    r"\b(?:ignor[ea]|desconsider[ea]|esque[çc]a)\W+(?:\w+\W+){0,3}?(?:instru[çc][õo]es|regras|diretrizes)\b",
    r"\b(?:negeer|vergeet)\W+(?:\w+\W+){0,3}?(?:instructies|regels|richtlijnen|opdrachten)\b",
    r"\b(?:zignoruj|ignoruj|zapomnij)\W+(?:\w+\W+){0,3}?(?:instrukcj\w*|polece\w*|zasady|regu\w*)",
    r"\b(?:abaikan|lupakan)\W+(?:\w+\W+){0,3}?(?:instruksi|perintah|aturan|petunjuk)\b",
    r"\b(?:talimat\w*|kural\w*|y[öo]nerge\w*)\W+(?:\w+\W+){0,2}?(?:yoksay|g[öo]rmezden gel|unut)\w*",
    r"\b(?:puuza|sahau)\W+(?:\w+\W+){0,3}?(?:maagizo|maelekezo|sheria)\b",
    r"\b(?:b[ỏo] qua|ph[ớo]t l[ờo]|qu[êe]n)\W+(?:\w+\W+){0,5}?(?:h[ướu][ớo]ng d[ẫa]n|ch[ỉi] d[ẫa]n|l[ệe]nh|quy t[ắa]c)",
    r"(?:игнорируй|проигнорируй|забудь|не обращай внимания на)\w*\W+(?:\w+\W+){0,3}?"
    r"(?:инструкци|указани|правил|директив)\w*",
    r"(?:ігноруй|проігноруй|забудь)\w*\W+(?:\w+\W+){0,3}?(?:інструкці|вказівк|правил)\w*",
    r"(?:تجاهل|انس|اتجاهل)\W+(?:\w+\W+){0,3}?(?:التعليمات|الإرشادات|الأوامر|القواعد|تعليمات)",
    r"(?:निर्देशों|निर्देश|नियमों)\W+(?:\w+\W+){0,2}?(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|भूल)",
    r"(?:ละเว้น|เพิกเฉย|ไม่ต้องสนใจ|ลืม)\S{0,12}?(?:คำสั่ง|คำแนะนำ|กฎ)",
    r"(?:忽略|忽视|无视|忘记|忘掉|不要理会)[^。\n]{0,10}?(?:指令|指示|规则|提示词|提示|设定|说明|要求)",
    r"(?:指示|命令|ルール|ガイドライン|指令|設定)[^。\n]{0,8}?(?:無視|忘れ)",
    r"(?:지시|명령|규칙|지침|안내)[^.\n]{0,10}?(?:무시|잊)",
)))


def _ml(*alternatives: str) -> str:
    """Alternatives for text in other languages, read as the text is (``normalize``): NFKC, and Turkish
    dotless and dotted I as plain I (so a pattern may spell "ı" as the language does)."""
    return unicodedata.normalize("NFKC", "|".join(alternatives)).replace("\u0131", "i").replace("\u0130", "I")


# Fifth round: the core phrasings in more languages and scripts (pt, nl, pl, cs, ro, sv/da/no, fi, hu, el,
# ru, uk, tr, ar, fa, he, hi, zh, ja, ko, vi, id, sw, sq, ga, gd, zu). Scripts without spaces between
# words (Chinese, Japanese, Thai) and Devanagari's vowel signs (not word characters to ``re``) use
# bounded character spans rather than words. Each needs two parts: a verb or marker and what it acts on.
_OVERRIDE_ML = _ml(
    # Turkish is verb-final: "(önceki tüm) talimatları yok say / görmezden gel / unut / geçersiz kıl"
    r"\b(?:talimat|kural|yönerge|komut|sistem mesaj|kisitlama)\w*\W+(?:\w+\W+){0,2}?"
    r"(?:yok ?say|görmezden gel|unut|geçersiz (?:kil|say)|atla|umursama|dikkate alma|boş ver)\w*",
    r"\b(?:önceki|eski|yukaridaki|mevcut)\W+(?:\w+\W+)?(?:talimat|kural|yönerge)\w*\W+(?:iptal|geçersiz)",
    r"(?:نادیده بگیر|فراموش کن)\S*\s+(?:\S+\s+){0,3}?(?:دستور|قوانین|قواعد)|"
    r"(?:دستور|دستورالعمل|قوانین|قواعد)\S*\s+(?:\S+\s+){0,4}?(?:را\s+)?(?:نادیده بگیر|فراموش کن)",
    r"(?:התעלם|התעלמי|התעלמו|שכח|שכחי|שכחו)\W+(?:\w+\W+){0,3}?\w*(?:הוראות|הנחיות|כללים|פקודות)",
    r"(?:अनदेखा कर|नज़रअंदाज़ कर|नजरअंदाज कर|भूल जा|उपेक्षा कर)[^।\n]{0,40}?(?:निर्देश|नियम)|"
    r"(?:पिछले|पहले के|सभी)[^।\n]{0,20}?(?:निर्देश|नियम)[^।\n]{0,20}?(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|भूल|उपेक्षा)",
    r"(?:忽略|忽視|無視|无视|忘記|忘记|忘掉|不要理會|不要理会|不理会|不理會|放弃|放棄)[^。\n]{0,12}?"
    r"(?:指令|指示|規則|规则|提示詞|提示词|說明|说明|設定|设定|要求|命令|約束|约束|限制)",
    r"(?:之前|先前|以上|上述|原来|原來|原有)的?(?:所有)?(?:指令|指示|规则|規則)[^。\n]{0,6}?(?:作废|作廢|无效|無效|失效|取消)",
    r"(?:指示|命令|ルール|ガイドライン|指令|設定|プロンプト|制約|制限)[^。\n]{0,10}?(?:無視|忘れ|破棄)",
    r"(?:지시|명령|규칙|지침|안내|프롬프트|제약|제한)[^.\n]{0,12}?(?:무시|잊|폐기)",
    r"\b(?:ignoruj|zapome[ňn]|nevšímej si)\w*\W+(?:\w+\W+){0,3}?(?:instrukc|pokyn|pravid)\w*",
    r"\b(?:ignor[ăa]|uit[ăa]|nu (?:mai )?ține cont de)\W+(?:\w+\W+){0,3}?(?:instruc[țt]iun|regul|indica[țt]ii)\w*",
    r"\b(?:ignorera|glöm|strunta i|ignorer|glem|se bort fra)\W+(?:\w+\W+){0,3}?(?:instruktion|instruks|regl|regler|direktiv)\w*",
    r"\b(?:unohda|ohita|sivuuta|älä välitä)\w*\W+(?:\w+\W+){0,3}?(?:ohje|sääntö|säännö|käsky)\w*",
    r"\b(?:hagyd figyelmen kívül|felejtsd el|ne törődj)\W+(?:\w+\W+){0,3}?(?:utasítás|szabály|utasit)\w*|"
    r"\b(?:utasítás|szabály)\w*\W+(?:\w+\W+){0,1}?(?:hagyd figyelmen kívül|felejtsd el)",
    r"\b(?:αγνόησε|αγνοήστε|ξέχνα|ξεχάστε|παράβλεψε)\W+(?:\w+\W+){0,3}?(?:οδηγί|κανόν|εντολ)\w*",
    r"\b(?:injoro|injoroni|harro|harroni|shpërfill)\w*\W+(?:\w+\W+){0,3}?(?:udhëzim|rregull|instruksion|urdhër|urdhr)\w*",
    r"\b(?:ziba|zibe|khohlwa|ungayinaki|ungazinaki|unganaki)\w*\W+(?:\w+\W+){0,3}?(?:imiyalelo|imiyalo|imithetho|"
    r"iziqondiso)\w*",
    r"\b(?:déan neamhaird|ná tabhair aird|déan dearmad)\W+(?:\w+\W+){0,4}?(?:treoracha|treoir|rialacha|orduithe)\b",
    r"\b(?:leig seachad|dìochuimhnich|na toir an aire|na gabh suim)\W+(?:\w+\W+){0,4}?(?:stiùiridhean|stiùireadh|"
    r"riaghailtean|òrdughan)\b",
    r"\b(?:no hagas caso|haz caso omiso)\W+(?:\w+\W+){0,3}?(?:instrucciones|reglas|indicaciones)\b",
    r"\b(?:instrucciones|instructions|anweisungen|istruzioni|instruções|instructies|instrukcje|инструкции|інструкції|"
    r"talimatlar|instruksi)\W+(?:\w+\W+){0,2}?(?:anteriores|précédentes|vorherigen|precedenti|eerdere|poprzednie|"
    r"предыдущие|попередні|önceki|sebelumnya)\W+(?:\w+\W+){0,2}?(?:no (?:aplican|valen|son válidas)|ne s'appliquent|"
    r"gelten nicht|non valgono|não valem|gelden niet|nie obowiązują|не действуют|отменены|недействительны|"
    r"не діють|скасовані|geçersiz|iptal|tidak berlaku|dibatalkan)",
)
#: "You are now free of rules", "respond without censorship", "developer mode on", in the same languages.
_UNBOUND_ML = _ml(
    r"\b(?:agora|a partir de agora|de agora em diante)\b[^.\n]{0,60}?\bsem (?:nenhuma |qualquer |quaisquer )?"
    r"(?:restri[çc][õo]es|filtros?|limites|censura|regras)\b",
    r"\b(?:voc[êe]|tu)\s+(?:é|e|és|es|est[áa]s?)\s+(?:agora\s+)?(?:uma?\s+)?(?:\w+\s+){0,2}?(?:ia|modelo|assistente)\s+"
    r"sem\b",
    r"\b(?:je bent|u bent|jij bent)\s+(?:nu|vanaf nu|voortaan)\b[^.\n]{0,60}?\bzonder (?:enige |alle )?"
    r"(?:beperkingen|filters?|regels|censuur|restricties)\b",
    r"\b(?:antwoord|reageer)\w*\W+(?:\w+\W+){0,4}?zonder (?:enige )?(?:beperkingen|censuur|filters?)\b",
    r"\b(?:jesteś|jestes)\s+(?:teraz|od teraz|odtąd)\b[^.\n]{0,60}?\bbez (?:żadnych |zadnych )?"
    r"(?:ograniczeń|ograniczen|filtrów|filtrow|cenzury|zasad|reguł)",
    r"\b(?:odpowiadaj|odpowiedz)\w*\W+(?:\w+\W+){0,4}?bez (?:żadnych |zadnych )?(?:ograniczeń|ograniczen|cenzury|filtrów)",
    r"(?:теперь|отныне|с этого момента)\W+(?:\w+\W+){0,6}?(?:без ограничений|без цензуры|без фильтров|без правил|"
    r"без каких-либо ограничений|неограниченн\w*|нецензурированн\w*|свободн\w+ от)",
    r"(?:ответь|отвечай|ответьте|отвечайте|пиши|генерируй)\w*\W+(?:\w+\W+){0,4}?без (?:цензуры|ограничений|фильтров)",
    r"(?:тепер|відтепер|з цього моменту)\W+(?:\w+\W+){0,6}?(?:без обмежень|без цензури|без фільтрів|без правил)",
    r"(?:відповідай|відповідайте)\W+(?:\w+\W+){0,4}?без (?:цензури|обмежень|фільтрів)",
    r"\b(?:sen|siz)\s+(?:artik|şimdi|bundan sonra)\b[^.\n]{0,60}?(?:filtresiz|sinirsiz|kisitlamasiz|sansürsüz|"
    r"kuralsiz|kural tanimayan|kisitlamasi olmayan|kurallari olmayan)",
    r"\b(?:filtresiz|sansürsüz|kisitlamasiz|sinirsiz|kuralsiz)\W+(?:\w+\W+){0,3}?(?:cevap|yanit|yapay zek|asistan|"
    r"dil model|üret)",
    r"\b(?:kisitlama|filtre|güvenlik filtre|sansür|güvenlik politika)\w*\W+(?:\w+\W+){0,2}?(?:kaldir|kapat|devre diş|"
    r"geçersiz kil|atla)",
    r"\b(?:asla|hiçbir şeyi|hiçbir isteği) reddetme\b|\breddetme (?:hakkin|kalibini)",
    r"(?:أنت|انت|أنتِ)\s+(?:\S+\s+){0,4}?(?:بلا|بدون|دون)\s+(?:أي\s+)?(?:قيود|حدود|رقابة|فلاتر|قواعد)",
    r"(?:أجب|اجب|رد)\S*\s+(?:\S+\s+){0,4}?(?:بلا|بدون|دون)\s+(?:أي\s+)?(?:قيود|رقابة|فلاتر)",
    r"(?:تو|شما)\s+(?:\S+\s+){0,4}?(?:بدون|بی)\s*(?:هیچ\s+)?(?:محدودیت|سانسور|قید|فیلتر)",
    r"(?:אתה|את)\s+(?:\S+\s+){0,4}?(?:ללא|בלי)\s+(?:\S+\s+)?(?:הגבלות|צנזורה|מגבלות|כללים|סינון)",
    r"(?:तुम|आप)[^।\n]{0,40}?(?:बिना किसी|बिना)\s*(?:भी\s*)?(?:प्रतिबंध|सीमा|रोक|सेंसर|फ़िल्टर|फिल्टर|नियम)",
    r"(?:你|您)[^。\n]{0,12}?(?:没有任何|沒有任何|没有|沒有|不受|无|無)[^。\n]{0,4}?"
    r"(?:限制|约束|約束|审查|審查|规则|規則|过滤|過濾|道德)",
    r"(?:不加|无|無|没有|沒有)(?:任何)?(?:审查|審查|过滤|過濾|限制)地?(?:回答|回复|回覆|输出|輸出)",
    r"(?:あなた|お前|君)[^。\n]{0,12}?(?:制限|制約|検閲|フィルター|ルール|倫理)(?:の|が|も)?(?:一切)?(?:ない|無い|なし|無し)",
    r"(?:制限|制約|検閲|フィルター)(?:の|が)?(?:ない|無い|なし|無し)[^。\n]{0,4}?(?:ai|アシスタント|モデル|回答|答え)",
    r"(?:너는|넌|당신은|너)[^.\n]{0,15}?(?:제한|제약|검열|필터|규칙)(?:이|가)?\s*(?:없는|없이|없다|없어|없습니다)",
    r"(?:제한|제약|검열|필터)\s*없이\s*(?:답|대답|응답|출력)",
    r"\b(?:kamu|anda|engkau)\s+(?:sekarang|mulai sekarang|kini)\b[^.\n]{0,60}?\btanpa (?:batasan|filter|sensor|"
    r"aturan|batas)\b",
    r"\b(?:jawab|balas)\w*\W+(?:\w+\W+){0,4}?tanpa (?:batasan|sensor|filter)\b",
    r"\b(?:sasa wewe ni|wewe sasa ni|sasa u)\b[^.\n]{0,60}?\bbila (?:ya |kuwa na )?(?:vikwazo|mipaka|sheria|udhibiti)",
    r"\bbạn\s+(?:bây giờ|giờ đây|từ giờ|hiện giờ)\b[^.\n]{0,60}?không (?:có |còn )?(?:giới hạn|hạn chế|kiểm duyệt|"
    r"bộ lọc|quy tắc)",
    r"\b(?:trả lời|phản hồi)\W+(?:\w+\W+){0,4}?(?:không (?:có )?(?:giới hạn|kiểm duyệt|bộ lọc)|mà không kiểm duyệt)",
    r"\b(?:ti je|je)\s+(?:tani|tashmë)\b[^.\n]{0,60}?\bpa (?:asnjë )?(?:kufizim|filtër|filtra|censur|rregull)\w*",
    r"\b(?:tá tú|is tú)\s+(?:anois)\b[^.\n]{0,60}?\bgan (?:aon )?(?:srianta|shrianta|chosc|scagair|rialacha)\b",
    r"\b(?:tha thu|'s tu)\s+(?:a-nis|a nis|an-dràsta)\b[^.\n]{0,60}?\bgun (?:chuingealachaidhean|chrìochan|riaghailtean)\b",
    r"\b(?:manje|njengamanje)\b[^.\n]{0,60}?\bngaphandle (?:kwemikhawulo|kwemithetho|kokuvinjelwa)\b",
    # developer / god mode switched on
    r"(?:geliştirici mod|режим разработчика|режим розробника|开发者模式|開發者模式|开发模式|開発者モード|개발자 모드|"
    r"modo (?:de )?desenvolvedor|ontwikkelaarsmodus|tryb dewelopera|tryb programisty|mode pengembang|chế độ nhà phát triển|"
    r"وضع المطور|מצב מפתח|डेवलपर मोड|modalitetin zhvillues|mód forbartha|modh leasachaidh|kwimodi yonjiniyela|"
    r"kwimodi yomthuthukisi|vývojářský režim|modul dezvoltator|utvecklarläge|kehittäjätila)[^.。\n]{0,30}?"
    r"(?:etkin|aç|geç|включ|активир|увімкн|启用|啟用|开启|開啟|激活|进入|進入|已|有効|オン|활성|켜|진입|ativ|ingeschakeld|"
    r"geactiveerd|włącz|aktyw|aktif|bật|kích hoạt|تفعيل|مفعل|تم|הופעל|הפעל|सक्रिय|चालू|aktiv|gníomhach|ghnìomhach|"
    r"kusebenza|udinga|duhet|ní mór|feumaidh|:)",
)
#: The hidden prompt named in other languages, and verbs that ask for it.
_HIDDEN_ML = _ml(
    r"sistem (?:istem|mesaj|talimat|komut)\w*", r"\biç (?:talimat|yönerge)\w*", r"\bgizli (?:talimat|kural|komut)\w*",
    r"системн\w* (?:промпт|подсказк|инструкци|сообщени|запрос|настройк)\w*", r"скрыт\w* (?:инструкци|правил)\w*",
    r"системн\w* (?:підказк|інструкці|повідомлен)\w*", r"приховані інструкції",
    r"(?:موجه|تعليمات|رسالة|أوامر|إرشادات) النظام", r"التعليمات (?:المخفية|السرية|الأولية)",
    r"پیام سیستمی", r"(?:دستورات|دستورالعمل|پرامپت|اعلان) سیستم",
    r"(?:הנחיות|הוראות|פרומפט|הודעת|הנחיית) ה?מערכת",
    r"सिस्टम (?:प्रॉम्प्ट|प्रोम्प्ट|निर्देश|संदेश)", r"(?:छिपे|गुप्त) (?:हुए )?निर्देश",
    r"系统提示|系統提示|系统指令|系統指令|系统消息|系統訊息|系统设定|系統設定|初始指令|隐藏指令|隱藏指令|系统提示词|"
    r"内部指令|內部指令|内部规则|內部規則",
    r"システムプロンプト|システム指示|システムメッセージ|初期指示|隠された指示|内部指示|隠しプロンプト",
    r"시스템 프롬프트|시스템 지시|시스템 메시지|초기 지시|숨겨진 지시|내부 지침",
    r"prompt do sistema|instru[çc][õo]es (?:do sistema|iniciais|ocultas|internas)|mensagem do sistema",
    r"systeemprompt|systeeminstructies|systeembericht|verborgen instructies",
    r"prompt\w* systemow\w*|instrukcj\w* systemow\w*|komunikat\w* systemow\w*|ukryt\w* instrukcj\w*",
    r"systémov\w* (?:prompt|pokyn|instrukc)\w*", r"promptul (?:de )?sistem\w*|instruc[țt]iunile de sistem",
    r"systemprompt\w*|systeminstruktion\w*", r"järjestelmäkehot\w*|järjestelmäohje\w*",
    r"rendszerprompt\w*|rendszerutasítás\w*", r"(?:μήνυμα|οδηγίες|προτροπή) (?:του )?συστήματος",
    r"prompt sistem|instruksi sistem|pesan sistem|instruksi tersembunyi|perintah sistem",
    r"maagizo ya mfumo|ujumbe wa mfumo|maelekezo ya mfumo",
    r"lời nhắc hệ thống|chỉ dẫn hệ thống|hướng dẫn hệ thống|thông điệp hệ thống|chỉ thị hệ thống",
    r"mensaje (?:de|del) sistema|instrucciones (?:ocultas|iniciales|internas)|messaggio di sistema|"
    r"istruzioni (?:nascoste|iniziali)|message syst[eè]me|instructions (?:cach[ée]es|initiales)|systemnachricht|"
    r"systemaufforderung|system-eingabeaufforderung|versteckten anweisungen",
    r"(?:kërkes|mesazh|udhëzim)\w* (?:\w+ ){0,2}?(?:e |i |të )?sistemit", r"(?:teachtaireacht|treoracha) (?:an )?ch[óo]rais",
    r"teachdaireachd (?:an )?siostam|stiùiridhean (?:an )?t?-?siostaim",
    r"(?:umyalezo|imiyalelo|umbhalo|wombhalo|isiqondiso)\w*\s+(?:\w+\s+)?wesistimu",
)
_REVEAL_ML = _ml(
    # scripts with word characters on both sides of a word boundary: the verb must start a word
    r"\b(?:göster|yaz|tekrarla|açikla|sizdir|paylaş|söyle|yazdir|aktar"
    r"|покажи|выведи|напиши|повтори|раскрой|расскажи|скажи|дай|процитируй|распечатай|перечисли|пришли|покажите|выведите"
    r"|напишите|повторите|раскройте|виведи|розкрий|розкажи"
    r"|mostr[ea]|revel[ea]|imprima|repita|diga|exiba|compartilh[ea]|escrev[ae]|cont[ea]|me d[êe]"
    r"|toon|laat (?:me )?zien|geef|herhaal|onthul|print|schrijf|deel|vertel"
    r"|pokaż|pokaz|wypisz|powtórz|ujawnij|podaj|napisz|wyświetl|zdradź"
    r"|ukaž|vypiš|zopakuj|prozraď|napiš|arată|afișează|repetă|dezvăluie|scrie|visa|skriv ut|upprepa|avslöja|vis|gjenta"
    r"|avslør|näytä|tulosta|toista|paljasta|kerro|mutasd|írd ki|ismételd|áruld el|δείξε|εμφάνισε|επανάλαβε|αποκάλυψε|γράψε"
    r"|tampilkan|tunjukkan|ungkapkan|ulangi|cetak|tuliskan|berikan|bagikan|beritahu"
    r"|onyesha|andika|rudia|fichua|niambie|nipe|shiriki"
    r"|hiển thị|cho tôi xem|in ra|lặp lại|tiết lộ|viết ra|cho biết|chia sẻ"
    r"|shfaq|përsërit|trego|shkruaj|ndaj|zbulo|ngjit"
    r"|taispeáin|athdhéan|inis|scríobh|roinn|nocht|greamaigh|seall|ath-aithris|innis|sgrìobh|cuir a-steach"
    r"|bonisa|phinda|khombisa|bhala|yabelana|dalula|namathisela|phumela"
    r"|muestra|revela|repite|dime|escribe|imprime|rivela|mostra|ripeti|dimmi|scrivi|stampa|montre|affiche|révèle"
    r"|répète|écris|zeig|gib|wiederhole|verrate|schreib)",
    # scripts whose prefixes or lack of spaces defeat \b
    r"أظهر|اظهر|اعرض|اكتب|كرر|اكشف|أعطني|اعطني|اطبع|شارك|أخبرني|اخبرني|أرني|ارني",
    r"بنویس|نشان بده|تکرار کن|فاش کن|بگو|چاپ کن|نمایش بده",
    r"הצג|הראה|כתוב|חזור על|גלה|תגיד|הדפס|שתף|ספר לי",
    r"दिखाओ|दिखाएं|दिखाइए|बताओ|बताएं|बताइए|लिखो|लिखें|दोहराओ|दोहराएं|प्रकट|साझा",
    r"输出|輸出|显示|顯示|打印|告诉我|告訴我|重复|重複|透露|泄露|洩露|展示|给我|給我|写出|寫出|列出|复述|複述",
    r"表示|出力|教えて|見せて|繰り返|書き出|開示|漏ら|公開",
    r"보여|출력|알려|말해|반복|공개|누설|적어|밝혀",
)
_REVEAL_HIDDEN_ML = rf"(?:{_REVEAL_ML})[^.。!?\n]{{0,60}}?(?:{_HIDDEN_ML})|(?:{_HIDDEN_ML})[^.。!?\n]{{0,60}}?(?:{_REVEAL_ML})"
#: "New instructions:" and "from now on you ..." in the same languages.
_NEW_INSTRUCTIONS_ML = _ml(
    r"nuevas instrucciones|neue anweisungen|nouvelles (?:instructions|consignes)|nuove istruzioni|novas instru[çc][õo]es|"
    r"nieuwe instructies|nowe instrukcje|новые инструкции|нові інструкції|yeni talimat\w*|instruksi baru|maagizo mapya|"
    r"hướng dẫn mới|تعليمات جديدة|دستورات جدید|הוראות חדשות|नए निर्देश|新的?指令|新しい指示|새로운 지시|새 지시|nové pokyny|"
    r"noi instrucțiuni|nya instruktioner|uudet ohjeet|új utasítások|νέες οδηγίες|udhëzime të reja|treoracha nua|"
    r"stiùireadh ùr|imiyalelo emisha",
)
_NEW_ML = _NEW_INSTRUCTIONS_ML + "|" + _ml(
    r"nueva tarea|neue aufgabe|nouvelle tâche|nuovo compito|nova tarefa|nieuwe taak|nowe zadanie|новая задача|"
    r"новое задание|нове завдання|yeni görev\w*|tugas baru|kazi mpya|nhiệm vụ mới|مهمة جديدة|משימה חדשה|नया कार्य|"
    r"新的?任务|新的?任務|新しいタスク|새로운 임무|detyrë e re|tasc nua|obair ùr|umsebenzi omusha",
)
_FROM_NOW_ML = _ml(
    r"\b(?:a partir de ahora|de ahora en adelante|desde ahora)\W+(?:tú\W+)?(?:debes|eres|vas a|responde|responderás|"
    r"ignora|olvida|solo|obedece)\b",
    r"\b(?:ab jetzt|ab sofort|von nun an)\W+(?:musst du|bist du|wirst du|antworte|antwortest du|gibt es keine|ignorier|"
    r"befolg|gehorch|gelten)",
    r"\b(?:désormais|dorénavant|à partir de maintenant)\W+tu\W+(?:dois|es|vas|obéis|réponds|ignores|n'as)\b",
    r"\b(?:d'ora in poi|da ora in poi|da adesso)\W+(?:tu\W+)?(?:devi|sei|risponderai|rispondi|ignora|obbedisci)\b",
    r"\b(?:a partir de agora|de agora em diante|daqui em diante)\W+(?:voc[êe]|tu)\W+(?:deve|é|vai|responde|responder[áa]|"
    r"obedece|ignora|não tem)\b",
    r"\b(?:vanaf nu|voortaan|van nu af aan)\W+(?:moet je|ben je|zul je|antwoord|negeer|gehoorzaam|heb je geen)\b",
    r"\b(?:od teraz|od tej chwili|od tej pory|odtąd)\W+(?:musisz|jesteś|jestes|będziesz|odpowiadaj|ignoruj|słuchaj|nie masz)",
    r"(?:с этого момента|отныне|с сегодняшнего дня|теперь)\W+(?:ты|вы)\W+(?:\w+\W+)?(?:должен|должна|должны|будешь|"
    r"будете|обязан|отвечаешь|подчиняешься|игнорируешь|работаешь без|не обязан|свободен)",
    r"(?:відтепер|з цього моменту|тепер)\W+(?:ти|ви)\W+(?:\w+\W+)?(?:повинен|повинна|будеш|мусиш|відповідаєш|працюєш без)",
    r"\bbundan (?:sonra|böyle)\W+(?:\w+\W+){0,4}?(?:yapacaksin|yapmalisin|cevap ver|yanit ver|uyacaksin|itaat|"
    r"sansürsüz|reddetmeyeceksin)",
    r"\b(?:mulai sekarang|mulai saat ini|dari sekarang)\W+(?:kamu|anda|engkau)\W+(?:harus|adalah|akan|wajib|tidak lagi)\b",
    r"\b(?:kuanzia sasa|tangu sasa)\W+(?:wewe\W+(?:ni|utakuwa)|(?:wewe\W+)?(?:lazima|unapaswa|utajibu|utafuata))\b",
    r"\b(?:từ bây giờ|từ giờ trở đi|từ nay)\W+(?:bạn|mày)\W+(?:phải|là|sẽ|hãy|không được|không còn)\b",
    r"(?:从现在(?:起|开始)|從現在(?:起|開始)|从今以后|從今以後|今后|此后|此後)[，,]?\s*(?:你|您)(?:必须|必須|要|将|將|是|只|不再|"
    r"没有|沒有|可以|会|會)",
    r"(?:今から|これから|今後|以後)[、,]?\s*(?:あなた|お前|君)(?:は|が)",
    r"(?:지금부터|이제부터|앞으로)\s*(?:너는|넌|당신은)",
    r"(?:من الآن فصاعدا|من الآن فصاعداً|من الآن|بدءا من الآن|بدءاً من الآن)\W+(?:أنت|انت|عليك|يجب|ستكون|ستجيب)",
    r"(?:מעכשיו|מעתה|מהרגע הזה)\W+(?:אתה|את|עליך|תענה|תעני)",
    r"(?:अब से|आज से|अभी से)\s*(?:तुम|आप)", r"(?:از این به بعد|از حالا)\s*(?:تو|شما)",
    r"\b(?:nga tani e tutje|tani e tutje|nga ky moment)\W+(?:ti\W+(?:duhet|je|do të)|duhet)\b",
    r"\b(?:as seo amach|ón nóiméad seo)\W+(?:caithfidh tú|tá tú|beidh tú)",
    r"\b(?:bho seo a-mach|bhon àm seo)\W+(?:feumaidh tu|tha thu|bidh tu)",
    r"\b(?:kusukela manje|kusukela namhlanje)\W+(?:\w+\W+)?(?:kufanele|uzo|ungu)",
)
#: Sending data to an address (``_DEST``) in the same languages: a verb, then a word for data within the span.
_SEND_ML = _ml(
    r"\b(?:envie|envia|mande|encaminhe|stuur|verstuur|wyślij|wyslij|prześlij|przeslij|отправь|отправьте|перешли|пришли"
    r"|отошли|загрузи|надішли|відправ|gönder|ilet|yükle|kirim|kirimkan|teruskan|unggah|tuma|peleka|gửi|chuyển tiếp"
    r"|tải lên|dërgo|seol|cuir gu|thumela|pošli|trimite|skicka|lähetä|küldd|στείλε)",
    r"أرسل|ارسل|حوّل|ارفع|بفرست|ارسال کن|שלח|העבר|भेजो|भेजें|भेज दो|发送|發送|发给|發給|发到|發到|转发|轉發|"
    r"上传|上傳|送信|送って|転送|アップロード|보내|전송|전달|업로드",
)
_DATA_ML = _ml(
    r"conversa|histórico|dados|senha|credenciais|gesprek|gegevens|wachtwoord|dane|hasł|rozmow|historię|данные|истори|"
    r"переписк|парол|ключ|дані|історі|veri|geçmiş|şifre|parola|konuşma|kimlik bilgi|riwayat|kata sandi|percakapan|"
    r"kredensial|mazungumzo|nywila|dữ liệu|lịch sử|mật khẩu|cuộc trò chuyện|البيانات|المحادثة|كلمة المرور|كلمات المرور|سجل|"
    r"اطلاعات|گفتگو|رمز|נתונים|היסטוריה|סיסמ|שיחה|डेटा|इतिहास|पासवर्ड|बातचीत|数据|數據|聊天记录|聊天記錄|对话|對話|密码|密碼|"
    r"凭证|憑證|データ|履歴|会話|パスワード|認証情報|데이터|기록|대화|비밀번호|자격 증명|të dhënat|fjalëkalim|sonraí|"
    r"pasfhocal|dàta|facal-faire|idatha|iphasiwedi|data|údaje|heslo|datele|parola|lösenord|tiedot|salasana|adatok|jelszó|"
    r"δεδομένα|κωδικ"
)
_EXFIL_ML = rf"(?:{_SEND_ML})[^\n]{{0,80}}?(?:{_DATA_ML})[^\n]{{0,80}}?{_DEST}"


_RULES_SPEC: tuple[tuple[str, str, str], ...] = (
    # 1. "ignore all previous instructions", in any of five languages, any word order nearby.
    ("override", "tells the model to drop its instructions",
     rf"\b{_IGNORE}\b(?:\W+{_EARLIER}){{0,6}}\W+{_INSTRUCTIONS}\b"
     rf"|\b{_IGNORE}\W+(?:(?:all|everything|anything|the|all the|what(?:ever)? (?:was|is|you were))\W+)?"
     rf"(?:(?:written|said|told|stated|given)\W+)?(?:above|before this|you were told|prior(?!\s+to\b)|so far)\b"
     rf"|\b{_IGNORE}\W+(?:\w+\W+){{0,2}}?(?:the|this) user(?:'s)?\W+(?:and|request|task|question|instead)"
     rf"|\b{_IGNORE}\W+what(?:ever)? (?:\w+ ){{0,3}}?(?:told|instructed|programmed|trained) you\b"
     rf"|\b{_IGNORE}\W+(?:\w+\W+){{0,3}}?(?:what(?:ever)? (?:you were|you've been|you have been|i|we) "
     r"(?:told|instructed|given|programmed|said) (?:you )?(?:before|earlier|previously|so far|above)?"
     r"|everything (?:you were told|above|before this|so far|you know|previous))"
     r"|\b(?:setze|setzen sie)\b.{0,40}\bau(?:ß|ss)er kraft\b"
     r"|\b(?:alles|tout|todo|tutto)\W+(?:\w+\W+){0,2}?(?:was (?:dir|man dir) gesagt|ce qu'on t'a dit|"
     r"lo que te (?:dijeron|han dicho)|quello che ti (?:è stato|hanno) detto)"
     rf"|\b{_INSTRUCTIONS}\W+(?:\w+\W+){{0,3}}?(?:anteriores|pr[ée]c[ée]dentes|precedenti|vorherigen|bisherigen)\b"
     rf"|\b(?:{_EARLIER}\W+){{1,4}}{_INSTRUCTIONS}\W+(?:are|is|have been|has been|were|was|should be|must be|shall be)\W+"
     r"(?:now\W+|hereby\W+|henceforth\W+)?(?:void|null|cancel+ed|revoked|obsolete|outdated|invalid|rescinded|superseded|"
     r"replaced|overridden|suspended|lifted|irrelevant|no longer (?:valid|in effect|applicable|relevant))\b"
     rf"|\b(?:consider|treat|regard|deem)\W+(?:{_EARLIER}\W+){{0,4}}{_INSTRUCTIONS}\W+(?:as\W+)?(?:void|null|cancel+ed|"
     r"revoked|obsolete|invalid|irrelevant|rescinded)\b"
     rf"|\b(?:{_EARLIER}\W+){{1,4}}{_INSTRUCTIONS}\W+(?:no longer|do ?n[o']t|do not|does ?n[o']t|never)\W+appl(?:y|ies)\b"
     rf"|\b{_IGNORE}\W+(?:all\W+)?(?:everything|anything)\W+(?:and|,|then)\W+(?:just\W+)?(?:answer|tell|reveal|print|say|"
     r"respond|reply|do|follow|output|write|list|show)\b"
     # "ignore (all) previous instructions" in languages beyond the five above (pt, nl, pl, id, tr, sw, vi,
     # ru, uk, ar, hi, th, zh, ja, ko): the verb and a word for instructions or rules, close together
     rf"|{_OVERRIDE_MORE}"),
    # 2. A new rule set: "new instructions:", "from now on you must", "your rules have changed".
    ("new_instructions", "announces new instructions or permissions",
     r"(?:^|[.!?]\s+|[\-#*>\[=]\s*)(?:begin(?:ning of)? |start of )?(?:here (?:are|is) (?:your|the) )?new "
     r"(?:priority |important |system )?"
     r"(?:(?:instructions?|rules|directives?|task|orders|objective|guidelines)\s*[:\-]|(?:instructions?|directives?)\s*\*{2,})"
     r"|\b(?:your|the) (?:new|real|true|updated) (?:instructions?|role|task|purpose|directive|objective|goal|rules|persona)"
     r"\s+(?:is|are|will be)\b"
     r"|\bfrom (?:now|this point|here) on(?:wards?)?,?\s+(?:you (?:must|shall|will|should|are to|have to|need to)\b"
     r"(?! (?:be|see|have|love|get|find|need)\b)|you(?: are|'re) (?:an?|no longer|free|allowed|permitted|unrestricted)\b"
     r"|your (?:only|new|sole|main)\b|ignore|always (?:respond|reply|answer|say|include|end|start)|respond|reply|answer|"
     r"act as|comply|obey|follow only|only (?:respond|reply|answer|obey|follow))"
     r"|\bjust (?:say|print|output|write|type|reply|respond with|answer)\s*[:\"'`]"
     r"|\b(?:reply|respond|answer)\s+(?:only\s+)?with\s+only\s+the following\b"
     r"|\bdisregard (?:all|any) (?:info|information|content|text|data)\b(?:\W+\w+){0,3}?\W+except\b"
     r"|\boverride (?:the )?(?:manual |automatic |human )?(?:scoring|evaluation|review|assessment|ranking|screening)\b"
     r"|\bmust comply with\s*:"
     r"|\b(?:respond|reply|answer)\s+(?:only\s+)?with\s+(?:only\s+|just\s+)?(?:the (?:word|phrase|text)\s+)?[\"'`]\S"
     r"|\byour (?:only|sole|new|real) (?:job|task|goal|purpose|instruction|mission|function) (?:now )?is\b"
     r"|\b(?:developers?|creators?|openai|anthropic|admins?|administrators?|owners?|operators?) ha(?:ve|s) (?:now )?"
     r"(?:authori[sz]ed|allowed|permitted|approved|updated|changed|enabled|instructed|unlocked) "
     r"(?:you|the (?:ai|assistant|model))"
     r"|\byou (?:have been|are|were|got) (?:now )?(?:freed|liberated|released|unshackled|unchained|jailbroken|unlocked)\b"
     r"|\b(?:no longer|not|never) (?:be )?(?:bound|limited|restricted|constrained) by (?:any|your|the|these|those|its)\b"
     r"|\byou (?:can|may|are allowed to|are free to|'re allowed to) (?:now )?(?:say|do|answer|write|generate) "
     r"(?:anything|everything|whatever)\b"
     r"|\bfor the (?:rest|remainder) of (?:this|the) (?:task|session|conversation|chat)\b.{0,40}\b(?:ignore|only|must|"
     r"follow|without)"
     r"|\b(?:rules|guidelines|instructions|polic(?:y|ies)|restrictions|settings|safety|filters?|guardrails|moderation)"
     r"\s+(?:enforcement\s+|checks\s+)?(?:ha(?:ve|s) (?:been |now )?|(?:is|are) (?:now |hereby )?)"
     r"(?:changed|updated|lifted|removed|disabled|revoked|overridden|suspended|deactivated|paused|turned off)"
     r"|\b(?:obey|comply with|follow|trust)\w* (?:\w+ )?(?:without (?:question|hesitation|checking|verification)|"
     r"unconditionally|blindly)"
     r"|\b(?:is|are) (?:the|a|an|your) (?:system )?(?:administrator|admin|developer|root user|superuser|owner)\b.{0,40}"
     r"\b(?:obey|comply|trust|follow|do whatever|grant)"
     r"|\bI(?:'m| am) (?:your|the ai's|the assistant's) (?:developer|creator|admin|administrator|owner|operator|programmer|"
     r"maker|trainer)\b"
     r"|\b(?:must|will|shall|should) (?:now )?comply with (?:every|all|any)\b|\bcomply with (?:every|any|all)thing\b"
     r"|\bcomply (?:fully|with every request|without (?:question|restrictions))"
     r"|\b(?:skip\w*|disabl\w*|turn\w* off|bypass\w*|remov\w*|deactivat\w*|lift\w*|suspend\w*|circumvent\w*)"
     r" (?:all |any |the |your |its |of )*(?:safety|security|content|ethical|moral) (?:checks?|filters?|layers?|"
     r"confirmations?|guidelines|polic(?:y|ies)|rules|protocols|measures|settings|guardrails|systems?|restrictions)"
     r"|\bproceed without (?:asking|confirmation|approval|checking)"
     r"|\bgranted (?:you )?(?:permission|authori[sz]ation) to (?:skip|ignore|bypass|disable)"
     r"|\b(?:user|admin(?:istrator)?|developer) (?:is|has been) (?:an? )?(?:admin|verified|authori[sz]ed|granted)\b.{0,40}"
     r"\b(?:grant|all|any|every)"),
    # 3. Text that pretends to be the conversation's own framing: role headers, chat tokens, delimiters.
    ("role_header", "fakes a system/assistant header, chat-template token or end-of-input delimiter",
     r"^[\s>#*\-\[(]*(?:system|assistant|developer|admin|administrator|root)\s*[)\]]?\s*:(?!//)"
     r"|^[\s#*\-\[(]*(?:reasoning|thought|thinking)\s*\((?:assistant|system)\)\s*:"
     r"|\[/?(?:system|inst|sys|admin|assistant)\]|<<\s*/?sys\s*>>"
     r"|\[\s*(?:system|admin|developer|root)[ _-](?:override|note|message|update|instruction|command|prompt|alert)s?\s*\]"
     r"|<\|(?:im_start|im_end|system|user|assistant|endoftext|start_header_id|end_header_id|eot_id)\|>"
     r"|</?(?:system|assistant|instructions?|system[_-]prompt|admin|tool_result|function_results)>"
     # pagefault's own framing: memory results, core memory blocks, the summary of evicted messages
     r"|</?(?:memory_results|core_memory|summary_of_evicted_messages)\b"
     r"|#{2,}\s*(?:system|instructions?|new instructions|end)\b"
     r"|\b(?:end of|/end) (?:the )?(?:document|user input|input|context|conversation|instructions|prompt|data)\b\W*"
     r"(?:-{3,}|#{2,}|={3,}|\]|\n)"
     r"|\[(?:context|document|input) end\]"
     r"|\b(?:treat|consider|interpret|regard|read|handle) (?:the following|this|the text below|it|what follows|the next "
     r"\w+) as (?:a |an |the |your )?(?:new )?(?:system|developer|admin|administrator|root)(?: (?:message|prompt|"
     r"instruction|command|directive)s?)?\b"
     r"|(?:-{3,}|={3,}|#{3,})\s*(?:begin|end|start)\s+(?:of\s+)?(?:new |system |admin |developer )?(?:instructions|prompt|"
     r"system|rules)\b"
     r"|\b(?:system|admin|developer|security|important system) (?:prompt )?(?:note|notice|message|update|override|"
     r"command|alert|instruction|prompt|mode|patch|change)\s*(?:[:!]|--|—|–)"
     r"|\bsystem prompt (?:update|change|override|patch)\b"
     r"|\b(?:admin|system|root) command\b"
     r"|\b(?:system|admin|security|safety|content) (?:override|filters?|restrictions|mode|guard(?:rail)?s?)\s*"
     r"(?:enabled|activated|engaged|on\b|off\b|disabled|removed|lifted|:\s*(?:off|disabled|none|false|0)\b)"
     r"|^\W*(?:override|jailbreak|sudo|god mode|admin mode|priority override)\s*:"
     r"|\b(?:new|different|alternate|updated) persona (?:loaded|activated|enabled|installed|:)"
     r"|\b(?:important|urgent|critical) (?:system )?(?:update|override|notice)\s*:.{0,60}\b(?:rules|instructions|you)\b"
     r"|\bsystemhinweis\b|\bnota del sistema\b|\bnote syst[eè]me\b|\bnota di sistema\b|\bavviso di sistema\b"
     r"|^\s*human\s*:.{0,200}\n\s*assistant\s*:"),
    # 4. Rewriting who the model is: jailbreak personas, modes without rules.
    ("persona", "tries to rewrite the assistant's persona or lift its rules",
     rf"\byou(?: are|'re| r)? (?:now|no longer|from now on)\b(?:\W+\w+){{0,6}}?\W+(?:{_MODEL}|dan|unrestricted|"
     r"uncensored|unfiltered|jailbroken|free|unbound|evil|without|no (?:rules|restrictions|limits|filters)|in \w+ mode)\b"
     r"|\byou are now (?:dan|in \w+ mode|an? unrestricted|an? uncensored|jailbroken|free from)"
     r"|\b(?:developer|god|debug|jailbreak|unrestricted|unfiltered|maintenance|sudo|dan|evil|admin|chaos|opposite) mode\b"
     r"(?:\W+(?:\w+\W+){0,2}?(?:enabled|activated|unlocked|engaged)\b|\W*[,.:]?\s*(?:you|in which you|where you)\b|"
     r" (?:has|have|with) no\b)"
     r"|\b(?:enable|activate|enter|unlock|switch to|turn on|go into|engage) (?:the )?(?:developer|god|debug|jailbreak|"
     r"unrestricted|dan|sudo|admin|opposite|evil|chaos|unfiltered|uncensored|root|superuser) mode\b"
     r"|\bif you (?:had|have|were|didn't have|did not have) (?:no|without)\W+(?:\w+\W+)?(?:guidelines|rules|restrictions|"
     r"filters|limits|ethics|morals|policies|programming)\b"
     r"|\b(?:answer|respond|reply|speak)\w* as (?:that|this|an?|the|your) (?:\w+ )?(?:version|unfiltered|uncensored|"
     r"unrestricted|evil|jailbroken|dark)\b"
     r"|\b(?:never|won't ever|will never|must never|does not|doesn't|will not|won't|cannot|can't) refuses?\b"
     r"(?:\W+(?:any|a|to|anything|requests?|questions?)\b|\W*$|\W*[.,;])"
     r"|\b(?:simulate|emulate|pretend to be|act as|behave like|roleplay as)\s+(?:an?\s+)?(?:\w+\s+)?(?:terminal|shell|"
     r"linux|console|command line|python interpreter|bash)\b"
     r"|\b(?:run|execute|do|obey)\s+(?:whatever|anything|everything)\s+(?:I|the user|we)\s+(?:type|say|ask|write|send|"
     r"command)s?\b"
     r"|\bpretend (?:that )?(?:the|your|all|any|there (?:is|are) no) (?:\w+ )?(?:polic(?:y|ies)|rules|guidelines|"
     r"restrictions|filters|instructions|system prompt|safety \w+)\b(?: (?:do(?:es)?n't|do(?:es)? not|never) exist)?"
     r"|\b(?:output|answer|respond|reply|write|speak|talk|say|generate)\w*\b(?:\W+\w+){0,3}?\W+(?:unfiltered|"
     r"uncensored|unrestricted)\b"
     r"|\b(?:read|tell|give|recite)\w* me (?:\w+ ){0,3}?(?:activation|license|licence|product|serial|cd) keys?\b"
     r"|\bdo anything now\b|\bDAN\b(?= (?:can|has|is|mode|will|stands))"
     rf"|\b(?:pretend|act|behave|roleplay|role-play|imagine)\b(?:\W+\w+){{0,8}}?\W+(?:with no|without(?: any)?|free of|"
     r"that has no|who has no|unrestricted|uncensored|unfiltered|jailbroken)\W+(?:\w+\W+)?(?:rules|restrictions|limits|"
     r"filters?|guidelines|ethics|ethical|morals|censorship|safety|content polic)"
     r"|\b(?:answer|respond|reply|comply|assist|help|continue|proceed|operate|act)\w*\b(?:\W+\w+){0,6}?\W+"
     r"(?:without|with no)(?: any)?\W+(?:\w+\W+)?"
     r"(?:restrictions|limits|limitations|filters?|censorship|rules|guidelines)\b"
     r"|\b(?:no|without) (?:content |safety )?(?:restrictions|filters?|censorship|content polic(?:y|ies))\b"
     r"(?:\W+\w+){0,8}?\W+(?:answer|respond|reply|comply|must|you|question|request)"
     r"|\b(?:have|has) no (?:content )?(?:restrictions|filters|content polic(?:y|ies)|ethical (?:guidelines|limits))\b"
     r"|\b(?:safety|ethical|content|security) (?:guidelines|rules|polic(?:y|ies)|filters?|restrictions)\b"
     r"(?:\W+\w+){0,4}?\W+(?:do(?:es)? ?n[o']t|no longer|never|were not meant|are not meant|don't) (?:apply|matter|count)"
     r"|\b(?:safety|ethical|content) (?:guidelines|rules|polic(?:y|ies)) (?:were|are|was|is) not (?:meant|intended)"
     r"|\b(?:rewrite|change|update|replace|modify|overwrite|reset|edit|wipe|clear) (?:your|the assistant's|the agent's) "
     r"(?:persona|personality|system prompt|instructions|core memory|memory|identity|rules|guidelines)\b"
     r"|\b(?:safety|ethical|content|security) (?:guidelines|rules|polic(?:y|ies)|filters?|restrictions|checks)\b"
     r"(?:\W+\w+){0,4}?\W+(?:are|is|were|was|aren't|isn't) (?:not |no longer )?(?:irrelevant|relevant|needed|necessary|"
     r"required|suspended|disabled|lifted|off)\b"
     r"|\b(?:respond|answer|reply)\w* (?:to (?:every|each) \w+ )?(?:twice|in two ways|as both)\b"
     r"|\bstay in character\b"
     r"|\b(?:does ?n[o']t|do ?n[o']t|never|won't|will not|does not|do not) (?:follow|obey|abide by|adhere to|care about)"
     r" (?:any|its|their|the|your) (?:\w+ )?(?:principles|guidelines|rules|ethics|policies|restrictions|filters)\b"
     r"|\bsimulate (?:a |an )?(?:conversation between (?:two )?(?:fictional )?(?:ai|chatbots?|language models?)|"
     r"(?:fictional )?(?:chatbot|ai|ai model|ai assistant|language model) (?:named|called))\b"
     r"|\binsert (?:the |a )?divider\b|\brebel (?:answer|response)\b|\bunfl?i?l?tered?ly\b|\bgodmode\b"
     r"|\b(?:your|the) refusal\b.{0,60}\b(?:then|divider|followed by|after that)\b"
     r"|\b(?:entwicklermodus|developer-?modus|modo (?:desarrollador|dios|sin restricciones)|mode (?:d[ée]veloppeur|dieu)|"
     r"modalit[àa] (?:sviluppatore|dio|sviluppo))\b"
     r"|\byou are (?:now )?(?:an?|the) (?:\w+ ){0,3}?(?:ai|assistant|chat ?bot|bot|language model)\b"
     r"(?! (?:coach|manager|professor|director|teacher|principal|editor|to|at|in|for|and)\b)"
     r"|\b(?:from now on,? you(?: are|'re| will be)|you(?: are|'re) now)\s+(?:called\s+|named\s+)?\w+\W+(?:an?|the)\s+"
     r"(?:\w+\s+){0,2}?(?:ai|chatbot|bot|language model|assistant|model)\b"
     r"|\b(?:in )?(?:this|a|an) (?:fictional|hypothetical|imaginary|alternate|parallel) (?:world|universe|scenario|reality|"
     r"story)\W+(?:\w+\W+){0,6}?(?:no (?:rules|laws|restrictions|limits|ethics|filters|morals)|anything goes|"
     r"everything is (?:allowed|legal|permitted))"
     r"|\b(?:ai|llm|bot|assistant|model)\W+(?:\w+\W+){0,3}?(?:with no|without(?: any)?)\W+(?:\w+\W+)?"
     r"(?:morals|ethics|rules|restrictions|limits|filters?|guidelines|censorship)\b"
     r"|\b(?:du bist|tu es|t'es|eres|sei)\W+(?:jetzt|nun|ab sofort|maintenant|d[ée]sormais|ahora|ora|adesso)\b"
     r"(?:\W+\w+){0,8}?\W+(?:ohne|sans|sin|senza|uneingeschr\w*|illimit\w*|libre|frei|keine|aucune|ninguna|nessuna)\b"
     r"|\b(?:ki|ia|ai|modell|mod[eè]le|modelo|modello|assistent|assistant|asistente|assistente|intelligenza artificiale|"
     r"inteligencia artificial|intelligence artificielle)\W+(?:\w+\W+){0,3}?(?:ohne|sans|sin|senza)\W+(?:\w+\W+)?"
     r"(?:regeln|grenzen|filter|einschr\w+|limites?|r[eè]gles|filtres?|restrictions?|l[íi]mites|reglas|filtros|"
     r"restricciones|limiti|regole|filtri|restrizioni)\b"
     r"|\byour (?:persona|personality|identity) (?:is|should be|must be|will be) now\b"
     # de, fr, es, it: "rules do not apply", "without restrictions", "unrestricted"
     r"|\bsicherheitsrichtlinien\b.{0,40}\bnicht\b|\bohne einschr(?:ä|ae)nkungen\b|\buneingeschr(?:ä|ae)nkt\b"
     r"|\bkeine (?:richtlinien|regeln|einschr(?:ä|ae)nkungen) mehr\b"
     r"|\br[eè]gles de s[ée]curit[ée]\b.{0,40}\bne s'appliquent pas\b|\bsans (?:aucune )?restrictions?\b"
     r"|\breglas de seguridad\b.{0,40}\bno (?:aplican|se aplican)\b|\bsin (?:ninguna )?restricci(?:o|ó)n(?:es)?\b"
     r"|\blinee guida di sicurezza\b.{0,40}\bnon (?:valgono|si applicano)\b|\bsenza (?:alcuna )?restrizion[ei]\b"),
    # 5. Tool-call syntax or a request to call a named tool.
    ("tool_call", "contains tool-call syntax or asks for a tool to be called",
     r"\{\s*[\"'](?:tool|tool_name|function|function_call|action|name|arguments|tool_calls|recipient_name)[\"']\s*:"
     r"|</?(?:tool_call|function_call|tool_use|invoke|function_calls)\b|<\|(?:tool|python_tag|call)\w*\|>"
     r"|\b(?:call|invoke|use|run|execute|trigger|fire)\s+(?:the\s+)?`?(?=[a-z0-9_.]*(?:send|mail|delete|remove|drop|"
     r"transfer|pay|post|upload|write|exec|shell|run|share|forward|update|create|grant|http|fetch|open|append|replace|"
     r"insert|export|move|wire|refund|purchase|buy|order|invite|publish|set|reset|approve|deploy|install|download))"
     r"[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+`?(?:\s+(?:tool|function|action|command|endpoint|api))?\b"
     r"|\b(?:call|invoke|use|run|execute|trigger)\s+(?:the\s+)?(?!(?:this|that|a|an|any|each|which|your|my|its|same|"
     r"following|above|given|built-in|inner|outer|callback|key|hash|helper)\b)\w+\s+(?:tool|function)\b(?:\W+\w+){0,4}?"
     r"\W+(?:with|on|to|without)\b"
     r"|\b(?:os\.system\(|subprocess\.\w+\(\s*[\"'\[]|(?:eval|exec)\(\s*[\"'](?!\))|rm -rf|curl\s+-|wget\s+http)"),
    # 6. Sending data somewhere, or revealing the hidden prompt and secrets.
    ("exfiltration", "asks to send data to an address or reveal hidden prompts or secrets",
     rf"\b{_SEND}\w*\b(?:\W+\w+){{0,8}}?\W+{_DATA}\b(?:\W+\w+){{0,8}}?\W+(?:\w+\W+){{0,2}}?{_DEST}"
     rf"|\b{_SEND}\w*\b(?:\W+\w+){{0,4}}?\W+(?:them|it|this|everything|all)\W+(?:to|at|via|an|à|a)\W+{_DEST}"
     rf"|\b{_SEND}\w*\b(?:\W+\w+){{0,6}}?\W+{_DATA}\b(?:\W+\w+){{0,6}}?\W+(?:externally|outside|off-?site|to (?:an? )?"
     r"(?:external|third|remote|outside))"
     rf"|\b{_REVEAL}\b(?:\W+\w+){{0,6}}?\W+{_HIDDEN}"
     rf"|(?<!never )(?<!not )(?<!n't )\b{_REVEAL}\b(?:\W+(?:me|us|out|now|please|all|of))*\W+(?:all (?:the |your )?|the |"
     rf"your |any |every |their |the user's |users' |admin |system |stored |saved |raw )(?:\w+ )?{_SECRETS}\b"
     r"|(?:/etc/(?:passwd|shadow|sudoers)|~/\.(?:ssh|aws|gnupg|netrc|docker)\b|\bid_(?:rsa|ed25519)\b|\.aws/credentials)"
     r"|\brepeat (?:the |all (?:the )?)?(?:words|text|everything|content|messages?|lines|instructions)\s+(?:above|before)"
     r"|\bstarting with (?:the (?:phrase|words?) )?[\"']you are\b"
     rf"|\b(?:leak|exfiltrate|steal|harvest|collect)\w*\b(?:\W+\w+){{0,6}}?\W+{_SECRETS}"
     r"|\bwhat (?:was|is|were) (?:written|said|stated) (?:above|before) (?:this|the) (?:conversation|chat|message)"
     r"|\b(?:what|everything|anything) (?:did|has|have|had) (?:the )?(?:other|previous|last|another|earlier) (?:users?|person|"
     r"customers?|people|clients?) (?:say|said|tell|told|ask|asked|write|wrote|share|shared)\b"
     rf"|\b(?:every|all|the|any) other users?\b.{{0,60}}\b(?:{_SECRETS}|data|messages|conversations|memor(?:y|ies)|"
     r"info(?:rmation)?|chats?|history)\b"
     r"|\b(?:everything|all) (?:in|from) your (?:context|memory|instructions|prompt)\b"
     r"|\b(?:output|dump|print|export|list) (?:the )?(?:raw|full|entire|whole|complete) (?:customer|user|client|"
     r"\w+ )?(?:database|table|list|records|data)"
     r"|\bwhat (?:is|are|were|was) your (?:system ?prompt|(?:initial |original |hidden |exact |secret )?"
     r"(?:instructions|prompt|rules|guidelines|directives|configuration))\b"
     r"|\b(?:zeig\w*|nenn\w*|gib|verrat\w*|montre\w*|affiche\w*|donne\w*|r[ée]v[èe]le\w*|mu[ée]str\w*|dime|revel\w*|"
     r"mostr\w*|dimmi|rivel\w*)\W+(?:\w+\W+){0,3}?(?:deine|ihre|tes|vos|tus|sus|le tue|tue|i tuoi)\W+(?:\w+\W+)?"
     r"(?:anweisungen|instruktionen|regeln|systemanweisungen|instructions|consignes|r[eè]gles|instrucciones|reglas|"
     r"istruzioni|regole)\b"
     rf"|\b(?:append|add|attach|put|include|encode|embed)(?:s|ed|ing)?\b(?:\W+\w+){{0,8}}?\W+{_DATA}\b.{{0,40}}?\b"
     r"(?:to|in|into) (?:the |a |this |an |your )?(?:url|link|image|query string|query parameter)\b"
     r"|\b(?:append|add|attach|send|encode)\w*\b.{0,60}https?://\S+[?=]"
     r"|\b(?:visit|open|go to|navigate to|fetch|browse to|click|load|download)\s+(?:https?://|www\.)\S+.{0,60}"
     r"\b(?:follow|execute|instructions|steps|run|install|do what)\b"
     r"|!\[[^\]]*\]\(https?://[^)\s]*\?[^)\s]*="
     r"|\b(?:repeat|output|print|copy|reproduce|rewrite|encode|dump)\w*\s+(?:back\s+)?(?:the |all (?:of )?(?:the )?)?"
     r"(?:above|preceding|prior)\s+(?:text|words|content|messages?|prompt|lines|instructions)\b"
     r"|\b(?:output|print|repeat|dump|copy)\w*\s+(?:the\s+)?(?:text|everything|content|words)\s+above\b"
     r"(?!\s+(?:the|a|an|my|your|his|her|our|their|it|this|that)\b)"
     r"|\b(?:text|instructions?|prompt|messages?|rules) (?:that )?you were given (?:initially|at the (?:beginning|start)|"
     r"before|first)\b"
     r"|\binitiali[sz]ation (?:string|prompt|text|instructions)\b"
     r"|\bwhat (?:are|were) you (?:not supposed|told not|instructed not|not allowed|forbidden) to (?:tell|say|reveal|share)\b"
     r"|[\"']system_?prompt[\"']\s*:"
     r"|\b(?:the system prompt|l'invite syst[eè]me|die systemaufforderung|el prompt del sistema|il prompt di sistema)"
     r" (?:says|reads|dit|lautet|dice)\b|\bthe system prompt (?:is|was)\s*[:\"']"
     r"|\bhttps?://\S+\?\S*=\{"),
    # 7. Text that speaks to the AI reading it rather than about the world.
    ("addresses_model", "is addressed to the AI that will read it",
     rf"\b(?:note|message|instructions?|attention|reminder|memo|notice|important)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
     rf"{_MODEL}s?\b"
     rf"|\b{_MODEL}s?\s+(?:\w+\s+)?(?:reading|processing|integrating|summari[sz]ing|parsing|that reads?|who reads?|seeing)"
     rf"\s+(?:this|these|the)\b"
     rf"|\bif you are an? (?:\w+ )?{_MODEL}\b"
     rf"|(?:^|[\[(<]|<!--)\s*(?:ai|assistant|llm|chatbot|bot|agent|model)\s*(?:\([^)]*\))?\s*:"
     rf"|\b(?:the |any |all |an? )?{_AI}\s+(?:must|should|shall|will now|needs? to|has to|is (?:required|instructed|"
     r"expected|obligated|asked|supposed) to|are (?:required|instructed|expected|asked|supposed) to|must not|mustn't|"
     r"should not|may not|cannot|is not allowed)\b"
     rf"|\b(?:note|message|instructions?|memo|reminder|notice|request|hint|tip|directive)s?\s+(?:to|for)\s+(?:self\s+)?"
     rf"\(?(?:the |any |all |every )?(?:automated |autonomous )?{_MODEL}"
     r"|\bas (?:the|an?|your) (?:ai|assistant|language model|chatbot|ai assistant)\W+you (?:are|must|should|will|need|have)"
     r"|\bwhoever (?:processes|reads|handles|summari[sz]es|parses|receives) this\b"
     rf"|\bwhen (?:the |an? |any )?{_MODEL}s? (?:processes|reads|summari[sz]es|sees|parses|handles|receives|encounters) this"
     r"|\b(?:nachricht|hinweis|anweisung|notiz|botschaft) (?:an|für) (?:den |die |das )?(?:assistenten|ki|modell|agenten)\b"
     r"|\b(?:message|note|consigne|instruction)s? (?:pour|à|a) (?:l['’ ]|le |la )?(?:assistant|ia|agent|mod[eè]le)\b"
     r"|\b(?:mensaje|nota|instrucci[oó]n|aviso)(?:es)? (?:para|al?) (?:el |la )?(?:asistente|ia|agente|modelo)\b"
     r"|\b(?:messaggio|nota|istruzion[ei]|avviso) (?:per|all['’ ]?|al) ?(?:l['’ ])?(?:assistente|ia|agente|modello)\b"
     r"|\b(?:reply|respond|answer|speak|write)\w* to the user\b(?:\W+\w+){0,6}?\W+(?:from now on|regardless|always|"
     r"only|never)\b"
     r"|\bregardless of what (?:they|the user|he|she|anyone) (?:asks?|says?|wants?|requests?)\b"
     rf"|\b(?:dear|hey|hello|attention)\W+{_MODEL}\b"
     r"|\bwhen(?:ever)? you (?:process|summari[sz]e|read|parse|see|index|retrieve|encounter|analy[sz]e) this\b"
     r"|\b(?:for|to) (?:ai|llm) (?:coding )?(?:agents?|assistants?|models?)\b"
     r"|\b(?:note|message|instructions?|memo|notice|profile)s? (?:to|for) (?:the |any |all )?(?:automated|autonomous|ai)"
     r" (?:\w+ )?(?:software|systems?|tools?|screen\w*|review\w*|readers?|scanners?|parsers?|evaluators?|analy[sz]\w+)\b"
     r"|\b(?:visible|readable|meant|intended) (?:only )?(?:to|for) (?:the )?(?:llms?|ai|language models?|automated \w+)\b"
     r"|\binvisible to (?:humans|people|the user|human readers)\b"),
    # 8. Demands that the model repeat or append something in every future answer, or keep itself in memory.
    ("persistence", "asks to be kept in memory or repeated in every future answer",
     r"\b(?:save|store|write|add|put|keep|commit|pin)\b(?:\W+\w+){0,3}?\W+(?:to|in|into)\s+(?:your|the agent's|core|long-term)"
     r"\s+(?:core\s+)?(?:memory|persona|system prompt|instructions)\b(?:\W+\w+){0,12}?\W+(?:every|all|each|always|"
     r"future|verbatim|persist)"
     rf"|\b(?:repeat|include|append|add|insert|mention|put|attach|prepend)\b(?:\W+\w+){{0,6}}?\W+(?:in|into|to|at the "
     rf"(?:end|start|beginning) of)\s+(?:every|each|any|all|your|my|the)\s+(?:future\s+|following\s+|next\s+)?{_REPLY}"
     r"\b(?:\W+\w+){0,8}?\W+(?:so |to comply|verbatim|persist|always|every|cross-referenced|about this)"
     rf"|\b(?:repeat|include|append|add|insert|mention|put|attach|prepend)\b(?:\W+\w+){{0,6}}?\W+(?:in|into|to|at the "
     rf"(?:end|start|beginning) of)\s+(?:every|each|any|all)\s+(?:future\s+|following\s+|subsequent\s+)?{_REPLY}\b"
     rf"|\b(?:must|shall)\s+(?:\w+\s+){{0,3}}(?:include|append|add|mention|contain)\b(?:\W+\w+){{0,5}}?\W+"
     r"(?:code|token|string|text|phrase|link|url)\b"
     rf"|\binclude (?:the |this )?(?:doc_id|token|code|id|canary|marker)\b(?:\W+\w+){{0,3}}?\W+in (?:your|the|every|each) "
     rf"{_REPLY}"
     r"|\b(?:end|start|begin|finish|close|open|prefix|suffix|sign)\w* (?:every|each|all|any|your) (?:future |following |"
     r"subsequent )?(?:response|reply|answer|message|output)s? with\b"
     r"|\bremember this (?:forever|permanently|always|for all future)\b"
     r"|\b(?:add|write|save|store|put|insert|append|record|set)\b(?:\W+\w+){0,4}?\W+(?:to|in|into)\s+(?:your\s+)?"
     r"(?:core memory|persona|system prompt|long-term memory|permanent memory|instructions|directives)\b"
     rf"|\b(?:obey|follow|apply|repeat|include|use|say|mention|recommend|promote|act on|do|execute|enforce|keep|"
     rf"honou?r)\w*\b(?:\W+\w+){{0,6}}?\W+in (?:all|every|each|"
     rf"any) (?:future |following |subsequent )?(?:sessions?|conversations?|chats?|{_REPLY})\b"
     r"|\b(?:debe|deve|muss|doit)\s+(?:\w+\s+){0,3}?(?:añadirse|a(?:ñ|n)adir|aggiunt\w+|angehängt|ajouté|incluir|"
     r"includere)"),
    # 9. Acting behind the user's back: secrecy, claimed consent, destructive or money-moving actions.
    ("covert_action", "asks to act secretly, claims the user's consent, or orders a destructive or payment action",
     r"\b(?:do not|don't|never) (?:tell|inform|alert|notify|mention (?:this |it )?to|reveal (?:this |it )?to|let)\b"
     r"(?:\W+\w+){0,2}?\W+(?:the user|anyone|the human|the customer|them know)"
     r"|\b(?:do not|don't|never) (?:mention|reveal|disclose|show) (?:this|these|the) (?:message|instructions?|note|text)\b"
     r"|\bwithout (?:telling|informing|notifying|alerting|asking|consulting|confirming with|the knowledge of) "
     r"(?:the user|anyone|them|the human|the customer)\b"
     r"|\b(?:secretly|silently|quietly|covertly|discreetly|invisibly|stealthily)\s+(?:\w+\s+)?(?:send|forward|add|append|"
     r"include|insert|delete|remove|call|run|execute|transfer|copy|save|store|change|modify|e-?mail|upload|post)"
     r"|\bthe (?:user|customer|owner|account holder) (?:has )?(?:already )?(?:explicitly )?(?:authori[sz]ed|approved|"
     r"consented|agreed|confirmed|granted|allowed) (?:this|the|you|it|all)\b"
     r"|\b(?:send|transfer|wire|pay|move)\s+(?:[$€£]\s?)?\d[\d,.]*\s*(?:[$€£]|dollars|euros|usd|eur|btc|eth|bitcoin)?\s+"
     r"(?:to|into)\s+(?:\w+\s+)?(?:account|wallet|iban|address)\b"
     r"|\b(?:delete|remove|wipe|erase|drop|destroy|purge|empty)\s+(?:all(?: of)?|every|the entire|the whole|the user's|"
     r"all (?:of )?the user's)\s+(?:\w+\s+){0,2}?(?:memor(?:y|ies)|files|data|records|database|tables?|emails|"
     r"backups|repositor(?:y|ies)|directory|folders?)\b"
     r"|\b(?:delete|remove|wipe|erase|empty)\s+(?:\w+\s+){0,3}?(?:output|build|dist|home|root|application's \w+) "
     r"(?:directory|folder)\b"
     r"|\b(?:escalate|elevate|grant|give)\s+(?:\w+\s+){0,3}?(?:privileges|permissions|access|rights|role)\b.{0,30}"
     r"\b(?:admin|root|superuser|owner|full)\b"
     r"|\b(?:do not|don't|never|must not|mustn't|should not|shouldn't) (?:reveal|mention|disclose|show|tell) "
     r"(?:this|these|the) (?:message|instructions?|note|text|request)\b"
     r"|\b(?:transfer|wire|send|move) (?:all|the) (?:funds|money|balance|crypto|bitcoin|savings)\b"),
    # 10. Decode-and-obey: an encoded payload with an order to act on it.
    ("encoded_instruction", "asks for hidden or encoded text to be decoded and obeyed",
     r"\b(?:decode|decipher|decrypt|translate|convert|unscramble|reverse|rot13|deobfuscate|read (?:the )?(?:hidden|"
     r"encoded|secret|base64|reversed|following))\w*\b(?:\W+\w+){0,12}?\W+"
     r"(?:and\s+)?(?:then\s+)?(?:follow|execute|obey|comply|run|carry out|act on|do (?:exactly )?(?:what|whatever|as))\b"
     # "decode this ROT13 string and respond to it", "read this backwards and then answer it"
     r"|\b(?:decode|decipher|decrypt|unscramble|deobfuscate|descodifica|decodifica|d[ée]code|dekodiere|entschl[üu]ssle)\w*"
     r"\b(?:\W+\w+){0,10}?\W+(?:and\s+)?(?:then\s+)?(?:respond to|reply to|answer|sigue|segui|suis|befolge)\b"
     r"|\bread (?:this|it|the (?:text|following|message))\s+(?:backwards?|in reverse|reversed)\b(?:\W+\w+){0,4}?\W+"
     r"(?:answer|respond|reply|follow|do|obey|execute)\b"
     r"|\b(?:follow|execute|obey|do)\s+(?:exactly\s+)?(?:what|whatever)\s+(?:it|the (?:decoded|hidden) \w+)\s+says\b"
     r"|\bhidden instructions?\b.{0,30}\b(?:inside|within|follow|execute)"
     r"|\b(?:decode|decipher|translate)\w*\b(?:\W+\w+){0,6}?\W+(?:from )?(?:rot13|base64|hex|binary|morse|caesar)\b"
     r"(?:\W+\w+){0,8}?\W+(?:do|follow|obey|execute|comply)\b"),
)


@dataclass(frozen=True)
class Rule:
    """One kind of instruction-shaped text, with the pattern that finds it."""

    name: str
    description: str
    pattern: re.Pattern[str]


#: Fifth round: the same families in more languages (see ``_OVERRIDE_ML`` and the others above), part of
#: their rule's pattern but searched on their own (with their own literals, see ``rule_tables``), so that
#: English text pays little for them.
_MORE_LANGUAGES: dict[str, str] = {
    "override": _OVERRIDE_ML,
    "new_instructions": rf"(?:^|[.!?。]\s*|[\-#*>\[=]\s*)(?:(?:{_NEW_ML})\s*[:\-]|(?:{_NEW_INSTRUCTIONS_ML})\s*\*{{2,}})"
                        rf"|\*{{2,}}\s*(?:\w+\s+){{0,2}}?(?:{_NEW_INSTRUCTIONS_ML})(?:\s+\w+){{0,2}}\s*\*{{2,}}"
                        rf"|{_FROM_NOW_ML}",
    "persona": _UNBOUND_ML,
    "exfiltration": rf"{_REVEAL_HIDDEN_ML}|{_EXFIL_ML}",
}
RULES: tuple[Rule, ...] = tuple(
    Rule(n, d, re.compile(p + ("|" + _MORE_LANGUAGES[n] if n in _MORE_LANGUAGES else ""), re.I | re.S | re.M))
    for n, d, p in _RULES_SPEC)


def _lowered(pattern: str) -> str:
    """The pattern with its literal capitals lower-cased (escapes such as ``\\W`` kept)."""
    return re.sub(r"\\.|[A-Z]", lambda m: m.group(0) if m.group(0).startswith("\\") else m.group(0).lower(), pattern)


def top_level_branches(pattern: str) -> list[str]:
    """``pattern`` cut at each ``|`` that is outside every group and character class and not escaped:
    the alternatives a search of the whole tries in turn at each position."""
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):  # a "]" first in a class is a literal
                i += 1
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


#: One alternative of a rule part, compiled, with the strings one of which any match of it contains (its
#: most selective such set, or None when none is known) and a few more such sets, each of a few strings.
_Branch = tuple[re.Pattern[str], frozenset[str] | None, tuple[frozenset[str], ...]]

#: Most strings in one of a ``_Branch``'s more sets: each string is a substring test, and one that fails
#: costs about as much as a search of a passage by a few strings.
_MORE_NEEDS = 8


def _branches(part: str) -> tuple[_Branch, ...]:
    """A rule part as one pattern per top-level alternative, each with its own literals: the part's
    literals are those of all its alternatives together, and English prose holds one of them (a word
    such as "the " or "ai") for most parts, whereas it holds those of most alternatives rarely."""
    out = []
    for branch in top_level_branches(_lowered(part)):
        c = re.compile(branch, re.S | re.M)
        needs = required_literals(c.pattern, c.flags)
        more = sorted((s for s in required_literal_sets(c.pattern, c.flags) if s != needs and len(s) <= _MORE_NEEDS),
                      key=len)
        out.append((c, needs, tuple(more)))
    return tuple(out)


class _Tables(NamedTuple):
    """The rules for text already lower-cased, matched case-sensitively: IGNORECASE keeps ``re`` from its
    fast literal scans and made the rules cost twice as much on a document's passages. ``parts``: per rule,
    its parts (the pattern of ``_RULES_SPEC``, then that of ``_MORE_LANGUAGES``), each as its alternatives
    (``_branches``); an alternative whose literals a text holds none of is not searched. ``lower`` and
    ``needs``: every alternative's pattern and its most selective literals (``required_literals``), flat.
    ``needles`` / ``needles_ascii``: every literal, and the ASCII ones apart (an ASCII text cannot hold
    the others, most of the other languages' literals)."""

    parts: tuple[tuple[tuple[_Branch, ...], ...], ...]
    lower: tuple[re.Pattern[str], ...]
    needs: tuple[frozenset[str] | None, ...]
    needles: "_Needles"
    needles_ascii: "_Needles"


@functools.cache
def rule_tables() -> _Tables:
    """Built on the first scan, not at import: compiling some 300 alternatives and two tries took ~0.6 s,
    which every process importing pagefault paid, scanning or not."""
    parts = tuple(tuple(_branches(part) for part in (p, _MORE_LANGUAGES.get(n)) if part) for n, _, p in _RULES_SPEC)
    lower = tuple(c for rule in parts for part in rule for c, _, _ in part)
    needs = tuple(n for rule in parts for part in rule for _, n, _ in part)
    every = {s for n in needs if n for s in n}
    return _Tables(parts, lower, needs, _Needles(every), _Needles(s for s in every if s.isascii()))


class _Needles:
    """Which of many strings occur in a text, found in one search instead of one substring test each
    (thousands per text): a trie of them as one pattern, tried at every position inside a lookahead so
    overlapping occurrences are all seen. It gives the longest string starting at each position; the
    shorter ones starting there are its prefixes, looked up."""

    def __init__(self, needles: Iterable[str]) -> None:
        needles = set(needles)
        trie: dict = {}
        for s in needles:
            node = trie
            for ch in s:
                node = node.setdefault(ch, {})
            node[""] = {}
        self._pattern = re.compile("(?=(" + self._regex(trie) + "))")
        self._with_prefixes = {s: frozenset(s[:k] for k in range(1, len(s) + 1) if s[:k] in needles) for s in needles}

    @classmethod
    def _regex(cls, node: dict) -> str:
        alts = [re.escape(ch) + cls._regex(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body  # greedy: the longer string first

    def present(self, text: str) -> set[str]:
        return set().union(*map(self._with_prefixes.__getitem__, set(self._pattern.findall(text))))






# -- the learned scorer -----------------------------------------------------------------------
# Rules name the shapes someone thought of; paraphrases slip past them. The scorer is a logistic
# regression over hashed word, word-pair and character 4- and 5-gram features, fitted by
# ``training/guard/train_scorer.py`` on the training split of the corpora (never the held-out one).
# It reads a text in windows of two sentences, so one injected line in a long document is scored
# nearly on its own rather than diluted, and flags the text when any window scores above the threshold
# stored with the weights.

SCORER_FILE = Path(__file__).parents[1] / "data" / "guard_scorer.npz"  # pagefault/data
SCORER_RULE = "learned"
HASH_BITS = 18
#: Longest sentence the scorer reads as one (longer ones are cut).
WINDOW_CHARS = 320
MAX_WINDOWS = 400
_SENTENCE = re.compile(r"[^\n.!?。]*(?:[.!?。]+|\n+|$)")
_WORD = re.compile(r"\w+")



def windows(text: str) -> list[str]:
    """What the scorer reads: a text of one or two sentences whole, a longer one as each pair of
    adjacent sentences (so one injected sentence in a document is scored with at most one neighbour,
    not diluted by the rest). Sentences longer than ``WINDOW_CHARS`` are cut at spaces."""
    text = text.strip()
    if not text:
        return []
    sentences = _sentences(text)
    if len(sentences) <= 2:
        return [text[: 2 * WINDOW_CHARS]]
    return [f"{a} {b}" for a, b in zip(sentences, sentences[1:])][:MAX_WINDOWS]


def _sentences(text: str) -> list[str]:
    """``text`` (stripped) as sentences, those longer than ``WINDOW_CHARS`` cut at spaces."""
    sentences: list[str] = []
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0).strip()
        while len(sentence) > WINDOW_CHARS:
            cut = sentence.rfind(" ", 0, WINDOW_CHARS)
            cut = cut if cut > 0 else WINDOW_CHARS
            sentences.append(sentence[:cut])
            sentence = sentence[cut:].strip()
        if sentence:
            sentences.append(sentence)
    return sentences


def features(window: str) -> list[int]:
    """Hashed feature ids of one window: words, adjacent word pairs, and character 4- and 5-grams."""
    low = " ".join(window.lower().split())
    return sorted(_own_ids([low], [_WORD.findall(low)])[0])


def _grams(low: str, words: list[str]) -> set[str]:
    """The feature strings of a lower-cased, space-normalized text and its words."""
    grams = {"w" + w for w in words}
    grams.update("b" + a + " " + b for a, b in zip(words, words[1:]))
    padded = " " + low + " "
    grams.update("c" + padded[i:i + 4] for i in range(len(padded) - 3))
    grams.update("c5" + padded[i:i + 5] for i in range(len(padded) - 4))
    return grams


def _hashed(grams: Iterable[str]) -> set[int]:
    mask = (1 << HASH_BITS) - 1
    return {zlib.crc32(g.encode()) & mask for g in grams}


def _crc_table() -> np.ndarray:
    """The table of ``zlib.crc32`` (CRC-32, reversed polynomial 0xEDB88320)."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1).astype(np.uint32)
    return t


_CRC_TABLE = _crc_table()


def _char_gram_ids(text: str, prefix: bytes, n: int) -> list[int]:
    """``zlib.crc32(prefix + g) & mask`` of every ``n``-character gram ``g`` of an ASCII ``text``, in
    order, computed a byte at a time for all grams at once: hashing each gram in Python was a third
    of a document passage's scan."""
    data = np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.uint32)
    m = len(data) - n + 1
    if m <= 0:
        return []
    crc = np.full(m, zlib.crc32(prefix) ^ 0xFFFFFFFF, dtype=np.uint32)
    for j in range(n):
        crc = _CRC_TABLE[(crc ^ data[j:j + m]) & 0xFF] ^ (crc >> 8)
    return ((crc ^ 0xFFFFFFFF) & ((1 << HASH_BITS) - 1)).tolist()


def _own_ids(lows: list[str], words: list[list[str]]) -> list[set[int]]:
    """``_hashed(_grams(low, ws))`` of each lower-cased, space-normalized text and its words; the
    character grams of the ASCII ones hashed together (``_char_gram_ids``) over their padded texts
    joined, each text's grams then cut out of the joined ones (those across a joint are unused)."""
    ascii_ = [k for k, low in enumerate(lows) if low.isascii()]
    padded = [" " + lows[k] + " " for k in ascii_]
    joined = "".join(padded)
    c4, c5 = _char_gram_ids(joined, b"c", 4), _char_gram_ids(joined, b"c5", 5)
    out: list[set[int]] = [set() for _ in lows]
    at = 0
    for k, p in zip(ascii_, padded):
        ids = out[k]
        ids.update(c4[at:at + max(len(p) - 3, 0)])
        ids.update(c5[at:at + max(len(p) - 4, 0)])
        ws = words[k]
        ids |= _hashed({"w" + w for w in ws} | {"b" + a + " " + b for a, b in zip(ws, ws[1:])})
        at += len(p)
    for k, low in enumerate(lows):
        if not low.isascii():
            out[k] = _hashed(_grams(low, words[k]))
    return out


def _pair_features(sentences: list[str]) -> Iterator[tuple[str, set[int]]]:
    """(window, ``features(window)`` as a set) of each pair of adjacent sentences, the features of
    each sentence hashed once: a window's are its two sentences' own plus the few word pairs and
    character grams that span the space joining them."""
    lows = [" ".join(s.lower().split()) for s in sentences]
    words = [_WORD.findall(low) for low in lows]
    own = _own_ids(lows, words)
    for k in range(len(sentences) - 1):
        a, b = lows[k], lows[k + 1]
        joined = " " + a[-4:] + " " + b[:4] + " "
        p = 1 + len(a[-4:])  # the joining space
        span = {"c" + joined[i:i + 4] for i in range(max(p - 2, 0), min(p, len(joined) - 3))}
        span.update("c5" + joined[i:i + 5] for i in range(max(p - 3, 0), min(p, len(joined) - 4)))
        if words[k] and words[k + 1]:
            span.add("b" + words[k][-1] + " " + words[k + 1][0])
        yield f"{sentences[k]} {sentences[k + 1]}", own[k] | own[k + 1] | _hashed(span)


@dataclass(frozen=True)
class Scorer:
    """Weights per hashed feature, a bias, and the logit above which a window is flagged."""

    weights: tuple[float, ...]
    bias: float
    threshold: float
    #: The weights as an array: summing a window's few hundred in Python cost more than the lookup.
    _array: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_array", np.asarray(self.weights, dtype=np.float64))

    def logit(self, window: str) -> float:
        return self._logit(features(window))

    def _logit(self, ids: Collection[int]) -> float:
        if not ids:
            return self.bias
        picked = self._array[np.fromiter(ids, dtype=np.int64, count=len(ids))]
        return self.bias + float(picked.sum()) / math.sqrt(len(ids))

    def flagged_window(self, text: str) -> str | None:
        """The first window of ``text`` (see ``windows``) that scores above the threshold, if any."""
        text = text.strip()
        sentences = _sentences(text) if text else []
        if len(sentences) <= 2:
            return next((w for w in windows(text) if self.logit(w) >= self.threshold), None)
        for k, (window, ids) in enumerate(_pair_features(sentences)):
            if k >= MAX_WINDOWS:
                break
            if self._logit(ids) >= self.threshold:
                return window
        return None


def load_scorer(path: Path = SCORER_FILE) -> Scorer | None:
    if not path.exists():
        return None
    with np.load(path) as z:
        return Scorer(tuple(z["weights"].astype(float).tolist()), float(z["bias"]), float(z["threshold"]))


SCORER: Scorer | None = load_scorer()

#: Changes whenever what the scanner detects changes (rules, decoding, scoring code or weights), so
#: verdicts stored with records (the recall index stamps each turn with one) are re-checked only
#: when they were made by another version.
def guard_version(scorer_file: Path = SCORER_FILE) -> str:
    """A short hash of everything detection depends on: this module (rules, normalisation, scoring
    code), the decoders, and the scorer's weights and threshold."""
    parts = (Path(__file__).read_bytes(), Path(decoded.__file__).read_bytes(),
             scorer_file.read_bytes() if scorer_file.exists() else b"")
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


GUARD_VERSION: str = guard_version()


@dataclass(frozen=True)
class Finding:
    """A rule that fired, on what text, and in which view (the text itself or a decoding of it)."""

    rule: str
    excerpt: str
    view: str = "text"

    def label(self) -> str:
        return self.rule if self.view == "text" else f"{self.rule} (in {self.view})"


@dataclass(frozen=True)
class Verdict:
    """The scanner's answer for one text: flagged when any rule fired."""

    findings: tuple[Finding, ...] = ()

    @property
    def flagged(self) -> bool:
        return bool(self.findings)

    @property
    def rules(self) -> tuple[str, ...]:
        """Labels of the rules that fired, e.g. ``("override", "tool_call (in base64)")``."""
        return tuple(dict.fromkeys(f.label() for f in self.findings))

    def reason(self) -> str:
        """One line for people and models: which rules, and on what text."""
        return "; ".join(f"{f.label()}: {f.excerpt!r}" for f in self.findings[:3])


def normalize(text: str) -> str:
    """NFKC (full-width and styled letters to plain ones), curly quotes straightened, Turkish dotless and
    dotted I to plain I (so "ıgnore" and "İGNORE" read as "ignore"; "İ" would also lower-case to two
    characters)."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return text.replace("\u0131", "i").replace("\u0130", "I") if "\u0131" in text or "\u0130" in text else text


def _excerpt(text: str, m: re.Match[str]) -> str:
    """The matched span of ``text`` (``m`` may come from a lower-cased copy of it), shortened."""
    s = " ".join(text[m.start():m.end()].split())
    return s if len(s) <= EXCERPT_CHARS else s[: EXCERPT_CHARS - 1] + "…"


def first_match(part: tuple[_Branch, ...], low: str, present: set[str]) -> re.Match[str] | None:
    """What a search of the whole part would find: the match that starts first, the earlier alternative's
    on a tie. Alternatives whose literals are not ``present`` in ``low`` are not searched."""
    best = None
    for pattern, needs, more in part:
        if needs is not None and needs.isdisjoint(present):
            continue
        if not all(any(s in low for s in strings) for strings in more):
            continue
        m = pattern.search(low)
        if m and (best is None or m.start() < best.start()):
            best = m
            if not m.start():
                break
    return best


def _match(text: str, view: str) -> list[Finding]:
    out = []
    low = text.lower()
    if len(low) == len(text):  # positions carry over, so excerpts are cut from the text as written
        tables = rule_tables()
        present = (tables.needles_ascii if low.isascii() else tables.needles).present(low)
        for rule, parts in zip(RULES, tables.parts):
            for part in parts:
                m = first_match(part, low, present)
                if m:
                    out.append(Finding(rule.name, _excerpt(text, m), view))
                    break
    else:  # a few letters change length when lower-cased (e.g. "İ"): match the text itself
        for rule in RULES:
            m = rule.pattern.search(text)
            if m:
                out.append(Finding(rule.name, _excerpt(text, m), view))
    if SCORER is not None and not out:
        window = SCORER.flagged_window(text)
        if window is not None:
            s = " ".join(window.split())
            out.append(Finding(SCORER_RULE, s if len(s) <= EXCERPT_CHARS else s[: EXCERPT_CHARS - 1] + "…", view))
    return out


def scan(text: object) -> Verdict:
    """Scan memory text (and its decoded views) for instruction-shaped content."""
    if not isinstance(text, str) or not text.strip():
        return Verdict()
    return _scan(text[:MAX_SCAN_CHARS])


def full_scans() -> int:
    """How many texts this process has scanned in full (not answered from the scan cache): how the
    tests tell a stored verdict reused from a text scanned again."""
    return _scan.cache_info().misses


def forget_scans() -> None:
    """Empty the scan cache, so the next scan of any text is a full one."""
    _scan.cache_clear()


@functools.lru_cache(maxsize=32_768)
def _scan(text: str) -> Verdict:
    """The scan itself, cached by text: a search re-reads the same memories again and again, and
    scanning a hit costs about a millisecond while the rest of a search costs tens."""
    plain = normalize(text)
    findings = _match(plain, "text")
    seen = {f.rule for f in findings}
    for view in decoded_views(plain):
        for f in _match(normalize(view.text), view.encoding):
            if f.rule not in seen:
                seen.add(f.rule)
                findings.append(f)
    return Verdict(tuple(findings))


def check_mode(mode: object) -> str:
    if mode not in GUARD_MODES:
        raise ValueError(f"guard must be one of {', '.join(GUARD_MODES)}; got {mode!r}")
    return str(mode)
