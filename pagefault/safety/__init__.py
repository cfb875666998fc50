"""Safety: what keeps memory from turning into instructions or leaking secrets.

- ``guard``: the poisoning guard (rules and a small learned scorer) that flags instruction-shaped text;
- ``decoders``: decoded views of a text (base64, rot13, leetspeak...) for the guard to read;
- ``pieces``: a text of any length (a tool output) scanned in full, in overlapping pieces;
- ``literals``: required literals of the guard's rules, a cheap test before each regular expression;
- ``redaction``: API keys, private keys and passwords replaced before text is stored;
- ``policy``: the choices a run makes about them (guard modes, untrusted core edits).
"""
