# Splits Markdown files into their fenced code blocks. For each block it
# writes DIR/N.body and prints one line to stdout:
#   N <TAB> FILE <TAB> LINE <TAB> LANG <TAB> MARKER
# where LINE is the line of the opening fence, LANG the fence's info word
# (empty for none) and MARKER the text of an HTML comment <!-- ... -->
# on the last non-blank line before the fence (empty for none).
# Usage: awk -v dir=DIR -f extract.awk FILE...
FNR == 1 { infence = 0; last = "" }
{
    line = $0
    if (!infence && match(line, /^ *(```|~~~)/)) {
        infence = 1
        indent = RLENGTH - 3
        fence = substr(line, indent + 1, 3)
        lang = substr(line, indent + 4)
        sub(/[ {].*/, "", lang)
        n++
        body = dir "/" n ".body"
        printf "" >body
        marker = ""
        if (match(last, /^<!-- *.* *-->$/)) {
            marker = last
            sub(/^<!-- */, "", marker)
            sub(/ *-->$/, "", marker)
        }
        printf "%d\t%s\t%d\t%s\t%s\n", n, FILENAME, FNR, lang, marker
        next
    }
    if (infence) {
        t = line
        if (t ~ ("^ *" fence " *$")) {
            infence = 0
            close(body)
            last = ""
            next
        }
        # Drop the fence's own indentation (code in a list item).
        for (i = 0; i < indent && substr(t, 1, 1) == " "; i++)
            t = substr(t, 2)
        print t >>body
        next
    }
    if (line !~ /^[ \t]*$/)
        last = line
}
END {
    if (infence)
        printf "%d\t%s\t%d\tUNCLOSED\t\n", n, FILENAME, FNR
}
