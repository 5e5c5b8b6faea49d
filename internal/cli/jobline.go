package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// explicitZero names the job fields whose zero, when written out, is a
// mistake rather than a default: "attempts": 0 runs no trial and
// "timeout": 0 allows no time, yet both would silently mean the default.
var explicitZero = map[string]bool{"attempts": true, "timeout": true, "idle_timeout": true}

// checkJobLine reports what encoding/json lets through silently in one
// job line: a key given twice in an object (the last would win) and an
// explicit zero in a field where zero means "the default".
func checkJobLine(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	return checkValue(dec, 0, "")
}

// maxJSONDepth bounds the nesting checkValue follows.
const maxJSONDepth = 64

func checkValue(dec *json.Decoder, depth int, key string) error {
	if depth > maxJSONDepth {
		return errors.New("nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if seen[k] {
					return fmt.Errorf("key %q given twice", k)
				}
				seen[k] = true
				if err := checkValue(dec, depth+1, k); err != nil {
					return err
				}
			}
			_, err = dec.Token() // '}'
			return err
		case '[':
			for dec.More() {
				if err := checkValue(dec, depth+1, ""); err != nil {
					return err
				}
			}
			_, err = dec.Token() // ']'
			return err
		}
	case json.Number:
		if depth == 1 && explicitZero[key] && t.String() != "" {
			if f, err := t.Float64(); err == nil && f == 0 {
				return fmt.Errorf("%q: 0 is not a value here (leave the field out for the default)", key)
			}
		}
	case string:
		if depth == 1 && explicitZero[key] && (t == "0" || t == "0s" || t == "") {
			return fmt.Errorf("%q: %q is not a value here (leave the field out for the default)", key, t)
		}
	}
	return nil
}
