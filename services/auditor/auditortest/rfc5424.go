package auditortest

import (
	"errors"
	"strconv"
	"strings"
)

// Syslog is a parsed RFC 5424 message.
type Syslog struct {
	Facility, Severity int
	Timestamp          string
	Hostname, AppName  string
	ProcID, MsgID      string
	// SD maps SD-ID to its parameters.
	SD  map[string]map[string]string
	Msg string
}

// ParseSyslog parses an RFC 5424 message strictly (the conformance side
// of the tests: header fields, SD-ID and SD-NAME syntax, PARAM-VALUE
// escapes).
func ParseSyslog(s string) (Syslog, error) {
	var m Syslog
	if !strings.HasPrefix(s, "<") {
		return m, errors.New("no PRI")
	}
	end := strings.IndexByte(s, '>')
	if end < 2 || end > 4 {
		return m, errors.New("bad PRI")
	}
	pri, err := strconv.Atoi(s[1:end])
	if err != nil || pri > 191 {
		return m, errors.New("bad PRI value")
	}
	m.Facility, m.Severity = pri/8, pri%8
	rest := s[end+1:]
	if !strings.HasPrefix(rest, "1 ") {
		return m, errors.New("version is not 1")
	}
	rest = rest[2:]
	fields := make([]string, 5)
	limits := []int{64, 255, 48, 128, 32}
	for i := range fields {
		j := strings.IndexByte(rest, ' ')
		if j <= 0 {
			return m, errors.New("short header")
		}
		fields[i], rest = rest[:j], rest[j+1:]
		if len(fields[i]) > limits[i] {
			return m, errors.New("header field too long")
		}
		for _, c := range []byte(fields[i]) {
			if c <= 32 || c >= 127 {
				return m, errors.New("header field not printable US-ASCII")
			}
		}
	}
	m.Timestamp, m.Hostname, m.AppName, m.ProcID, m.MsgID = fields[0], fields[1], fields[2], fields[3], fields[4]
	m.SD = map[string]map[string]string{}
	if strings.HasPrefix(rest, "-") {
		rest = rest[1:]
	} else {
		for strings.HasPrefix(rest, "[") {
			i := 1
			for i < len(rest) && rest[i] != ' ' && rest[i] != ']' {
				i++
			}
			id := rest[1:i]
			if !sdName(strings.Split(id, "@")[0]) {
				return m, errors.New("bad SD-ID " + id)
			}
			params := map[string]string{}
			for i < len(rest) && rest[i] == ' ' {
				i++
				eq := strings.IndexByte(rest[i:], '=')
				if eq <= 0 {
					return m, errors.New("bad SD-PARAM")
				}
				name := rest[i : i+eq]
				if !sdName(name) {
					return m, errors.New("bad SD-NAME " + name)
				}
				i += eq + 1
				if i >= len(rest) || rest[i] != '"' {
					return m, errors.New("PARAM-VALUE not quoted")
				}
				i++
				var v strings.Builder
				for ; i < len(rest) && rest[i] != '"'; i++ {
					c := rest[i]
					if c == '\\' && i+1 < len(rest) && strings.IndexByte(`"\]`, rest[i+1]) >= 0 {
						i++
						c = rest[i]
					} else if c == ']' {
						return m, errors.New("unescaped ] in PARAM-VALUE")
					}
					v.WriteByte(c)
				}
				if i >= len(rest) {
					return m, errors.New("unterminated PARAM-VALUE")
				}
				i++
				params[name] = v.String()
			}
			if i >= len(rest) || rest[i] != ']' {
				return m, errors.New("SD-ELEMENT not closed")
			}
			m.SD[id] = params
			rest = rest[i+1:]
		}
	}
	if rest != "" {
		if rest[0] != ' ' {
			return m, errors.New("no space before MSG")
		}
		m.Msg = rest[1:]
	}
	return m, nil
}

func sdName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= 32 || c >= 127 || c == '=' || c == ']' || c == '"' {
			return false
		}
	}
	return true
}
