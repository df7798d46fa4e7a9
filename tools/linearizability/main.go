// Command linearizability checks histories written by `strata torture
// --history DIR` with Porcupine (github.com/anishathalye/porcupine), a
// linearizability checker we did not write, against a register per key:
// put(v) sets the key to v, delete() removes it, get() returns the value
// or "absent".
//
// Usage: linearizability [-timeout 60s] [-visualize DIR] FILE.json...
//
// Each FILE is one history: {"ops": [{"client", "key", "op", "value",
// "call", "return", "outcome"}]} with times in nanoseconds. An op whose
// outcome is "unknown" (the client timed out or the connection broke: it
// may or may not have taken effect) is given a return at infinity, as
// Porcupine's documentation and Jepsen do. Reads that failed are dropped.
// Exit status 1 when any history is not linearizable, 2 on bad input.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

type op struct {
	Client  int     `json:"client"`
	Key     string  `json:"key"`
	Op      string  `json:"op"` // put, get, delete
	Value   *string `json:"value"`
	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome string  `json:"outcome"` // ok, unknown, failed
}

type history struct {
	Ops []op `json:"ops"`
}

type input struct {
	Key   string
	Op    string
	Value string
}

const absent = "\x00absent"

func model() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, o := range h {
				k := o.Input.(input).Key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], o)
			}
			var out [][]porcupine.Operation
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() interface{} { return absent },
		Step: func(state, in, out interface{}) (bool, interface{}) {
			i := in.(input)
			switch i.Op {
			case "put":
				return true, i.Value
			case "delete":
				return true, absent
			default: // get
				return out.(string) == state.(string), state
			}
		},
		DescribeOperation: func(in, out interface{}) string {
			i := in.(input)
			switch i.Op {
			case "put":
				return fmt.Sprintf("put(%s, %s)", i.Key, i.Value)
			case "delete":
				return fmt.Sprintf("delete(%s)", i.Key)
			default:
				o := out.(string)
				if o == absent {
					o = "absent"
				}
				return fmt.Sprintf("get(%s) -> %s", i.Key, o)
			}
		},
	}
}

func load(path string) ([]porcupine.Operation, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	var ops []porcupine.Operation
	unknown := 0
	for n, o := range h.Ops {
		in := input{Key: o.Key, Op: o.Op}
		var out interface{} = ""
		switch o.Op {
		case "put":
			if o.Value == nil {
				return nil, 0, fmt.Errorf("%s: op %d: put without a value", path, n)
			}
			in.Value = *o.Value
		case "delete":
		case "get":
			if o.Outcome != "ok" {
				continue // a failed read says nothing
			}
			if o.Value == nil {
				out = absent
			} else {
				out = *o.Value
			}
		default:
			return nil, 0, fmt.Errorf("%s: op %d: unknown op %q", path, n, o.Op)
		}
		ret := o.Return
		switch o.Outcome {
		case "ok":
		case "unknown", "failed":
			// May have taken effect at any time after its call.
			ret = math.MaxInt64
			unknown++
		default:
			return nil, 0, fmt.Errorf("%s: op %d: unknown outcome %q", path, n, o.Outcome)
		}
		ops = append(ops, porcupine.Operation{ClientId: o.Client, Input: in, Call: o.Call, Output: out, Return: ret})
	}
	return ops, unknown, nil
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "time limit per history (Unknown beyond it)")
	vis := flag.String("visualize", "", "write an HTML visualization of every non-linearizable history here")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [-timeout D] [-visualize DIR] HISTORY.json...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	bad, unknownRes, total, ops := 0, 0, 0, 0
	for _, path := range flag.Args() {
		h, unk, err := load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		total++
		ops += len(h)
		res, info := porcupine.CheckOperationsVerbose(model(), h, *timeout)
		fmt.Printf("%s: %d ops (%d indeterminate): %s\n", path, len(h), unk, res)
		switch res {
		case porcupine.Illegal:
			bad++
			if *vis != "" {
				os.MkdirAll(*vis, 0o755)
				out := filepath.Join(*vis, filepath.Base(path)+".html")
				if err := porcupine.VisualizePath(model(), info, out); err == nil {
					fmt.Printf("  visualization: %s\n", out)
				}
			}
		case porcupine.Unknown:
			unknownRes++
		}
	}
	fmt.Printf("checked %d histories, %d operations: %d linearizable, %d not linearizable, %d unknown (timed out)\n",
		total, ops, total-bad-unknownRes, bad, unknownRes)
	if bad > 0 {
		os.Exit(1)
	}
}
