<?xml version="1.0" encoding="UTF-8"?>
<!-- The lexicon the rewrite goldens use: one of every kind of lexeme. -->
<lexicon version="1.0"
      xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"
      xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
      xsi:schemaLocation="http://www.w3.org/2005/01/pronunciation-lexicon http://www.w3.org/TR/2007/CR-pronunciation-lexicon-20071212/pls.xsd"
      alphabet="ipa" xml:lang="en-US">
  <meta name="author" content="tourpack tests"/>
  <lexeme>
    <grapheme>Zermatt</grapheme>
    <phoneme>ˈtsɛrmat</phoneme>
    <alias>Tsair-matt</alias>
  </lexeme>
  <lexeme>
    <grapheme>Zermatt
      Matterhorn</grapheme>
    <alias>Tsair-matt Matter-horn</alias>
  </lexeme>
  <lexeme>
    <grapheme>Grindelwald</grapheme>
    <alias>Grin-del-vald</alias>
  </lexeme>
  <lexeme role="noun">
    <grapheme>Stelvio</grapheme>
    <grapheme>Stilfser Joch</grapheme>
    <phoneme alphabet="x-sampa">"stElvjo</phoneme>
    <phoneme prefer="true">ˈstɛlvjo</phoneme>
    <alias>Stell-vee-oh</alias>
  </lexeme>
  <lexeme>
    <grapheme>AT&amp;T</grapheme>
    <alias>A &amp; T "&lt;tel&gt;"</alias>
  </lexeme>
  <lexeme>
    <grapheme>Gornergrat</grapheme>
    <phoneme alphabet="x-sampa">"gOrn@rgra:t</phoneme>
    <alias>Gorner-graht</alias>
  </lexeme>
  <lexeme>
    <grapheme>ZERMATT</grapheme>
    <alias>Zermatt in capitals</alias>
  </lexeme>
</lexicon>
