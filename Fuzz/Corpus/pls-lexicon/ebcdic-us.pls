<?xml version="1.0" encoding="EBCDIC-US"?>
<lexicon/>
