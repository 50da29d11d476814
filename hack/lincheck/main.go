// Command lincheck says whether a history of puts and gets on keys, as clients of one etcd
// cluster saw them, is linearizable: whether one order of the operations exists that respects
// real time (an operation that returned before another was called comes first) and in which
// every get reads the latest put of its key. The check is porcupine's, one key at a time.
//
// The history is JSON lines on stdin, one operation each:
//
//	{"client": 3, "op": "put", "key": "k", "value": "v", "call": 120, "return": 135}
//	{"client": 4, "op": "get", "key": "k", "value": "v", "call": 130, "return": 140}
//
// call and return are one monotonic clock's nanoseconds. A get's value is null when the key
// was absent. A put whose outcome the client never learned (an error, a timeout) has no
// return: it may have taken effect at any time after its call, or never. A get that failed
// says nothing and is left out by the writer of the history.
//
// Prints one JSON line ({"result": "ok"|"illegal"|"unknown", ...}) and exits 0 when
// linearizable, 1 when not, 2 when the check ran out of time, 3 on bad input.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Client int     `json:"client"`
	Op     string  `json:"op"`
	Key    string  `json:"key"`
	Value  *string `json:"value"`
	Call   *int64  `json:"call"`
	Return *int64  `json:"return"`
}

// register is one key's state: whether it exists, and its value. Comparable, so porcupine's
// default equality and cache work on it.
type register struct {
	present bool
	value   string
}

type input struct {
	key   string
	put   bool
	value string
}

func model() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(input).key
				if _, seen := byKey[k]; !seen {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() interface{} { return register{} },
		Step: func(state, in, out interface{}) (bool, interface{}) {
			i := in.(input)
			if i.put {
				return true, register{present: true, value: i.value}
			}
			return out.(register) == state.(register), state
		},
		DescribeOperation: func(in, out interface{}) string {
			i := in.(input)
			if i.put {
				return fmt.Sprintf("put(%q, %q)", i.key, i.value)
			}
			o := out.(register)
			if !o.present {
				return fmt.Sprintf("get(%q) -> absent", i.key)
			}
			return fmt.Sprintf("get(%q) -> %q", i.key, o.value)
		},
	}
}

// read parses the history. A put with no return is given one later than every other event:
// it may take effect anywhere after its call.
func read(r io.Reader) ([]porcupine.Operation, error) {
	var ops []porcupine.Operation
	var open []int
	var last int64
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; scanner.Scan(); n++ {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(scanner.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if rec.Call == nil {
			return nil, fmt.Errorf("line %d: no call time", n)
		}
		op := porcupine.Operation{ClientId: rec.Client, Call: *rec.Call}
		switch rec.Op {
		case "put":
			if rec.Value == nil {
				return nil, fmt.Errorf("line %d: a put needs a value", n)
			}
			op.Input = input{key: rec.Key, put: true, value: *rec.Value}
			op.Output = register{}
		case "get":
			if rec.Return == nil {
				return nil, fmt.Errorf("line %d: a get needs its return (leave failed gets out)", n)
			}
			op.Input = input{key: rec.Key}
			if rec.Value != nil {
				op.Output = register{present: true, value: *rec.Value}
			} else {
				op.Output = register{}
			}
		default:
			return nil, fmt.Errorf("line %d: op %q is neither put nor get", n, rec.Op)
		}
		last = max(last, *rec.Call)
		if rec.Return == nil {
			open = append(open, len(ops))
		} else {
			if *rec.Return < *rec.Call {
				return nil, fmt.Errorf("line %d: returns before it is called", n)
			}
			op.Return = *rec.Return
			last = max(last, *rec.Return)
		}
		ops = append(ops, op)
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	for _, i := range open {
		ops[i].Return = last + 1
	}
	return ops, nil
}

func main() {
	timeout := flag.Duration("timeout", time.Minute, "give up (exit 2) after this long")
	visualize := flag.String("visualize", "", "write porcupine's HTML view of the history here")
	flag.Parse()
	ops, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(3)
	}
	start := time.Now()
	result, info := porcupine.CheckOperationsVerbose(model(), ops, *timeout)
	words := map[porcupine.CheckResult]string{
		porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown",
	}
	summary, _ := json.Marshal(map[string]interface{}{
		"result":     words[result],
		"operations": len(ops),
		"seconds":    time.Since(start).Seconds(),
	})
	fmt.Println(string(summary))
	if *visualize != "" {
		if err := porcupine.VisualizePath(model(), info, *visualize); err != nil {
			fmt.Fprintln(os.Stderr, "lincheck: visualize:", err)
		}
	}
	switch result {
	case porcupine.Ok:
		os.Exit(0)
	case porcupine.Illegal:
		os.Exit(1)
	default:
		os.Exit(2)
	}
}
