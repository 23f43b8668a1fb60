<?xml version="1.0" encoding="UTF-8"?>
<!--
  Alpine place names for the demo tours: a W3C PLS 1.0 pronunciation
  lexicon (see the docs catalog, "Input rules", on pronunciation lexicons).

  Every lexeme has an <alias>, so the demo's local voice (espeak-ng behind
  `tourpack serve-tts`, which reads no phonemes) can use it: it says the
  alias instead of the name. A Google voice gets the <phoneme> as SSML
  where a lexeme has one, and the alias as <sub alias> where it has none.
-->
<lexicon version="1.0"
      xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"
      alphabet="ipa" xml:lang="en-US">
  <lexeme>
    <grapheme>Stelvio</grapheme>
    <phoneme>ˈstɛlvjo</phoneme>
    <alias>Stell-vee-oh</alias>
  </lexeme>
  <lexeme>
    <grapheme>Heiligenblut</grapheme>
    <phoneme>ˈhaɪlɪɡn̩bluːt</phoneme>
    <alias>High-ligen-bloot</alias>
  </lexeme>
  <lexeme>
    <grapheme>Pasterze</grapheme>
    <phoneme>pasˈtɛrtsə</phoneme>
    <alias>pass-TAIR-tseh</alias>
  </lexeme>
  <lexeme>
    <grapheme>Fuscher Törl</grapheme>
    <alias>Foosher Turl</alias>
  </lexeme>
  <lexeme>
    <grapheme>Zermatt</grapheme>
    <phoneme>ˈtsɛrmat</phoneme>
    <alias>Tsair-matt</alias>
  </lexeme>
  <lexeme>
    <grapheme>Grindelwald</grapheme>
    <alias>Grin-del-vald</alias>
  </lexeme>
</lexicon>
