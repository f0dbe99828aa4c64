package cam

import (
	"fmt"
	"reflect"
)

// MaxKeySize is the widest key, in bytes.
const MaxKeySize = 16

// checkKeyType accepts a key type whose bytes are exactly what == compares,
// and that keyWords can read as 32-bit words: 4, 8, 12 or 16 bytes, aligned
// to at least 4, made of booleans and integers (in arrays and structs), with
// no padding and no blank fields.
//
// Padding is refused rather than masked: a padded key arrives in registers
// field by field, and reading it back as words through memory defeats
// store-to-load forwarding, which measured 3× slower per lookup.
func checkKeyType(t reflect.Type) error {
	if t.Size() == 0 || t.Size() > MaxKeySize || t.Size()%4 != 0 {
		return fmt.Errorf("key type %v is %d bytes (use 4, 8, 12 or 16 bytes, e.g. uint32, uint64, cam.Key16 or a struct of 32-bit fields)", t, t.Size())
	}
	if t.Align() < 4 {
		return fmt.Errorf("key type %v has alignment %d (give it a 32- or 64-bit field so its alignment is at least 4)", t, t.Align())
	}
	return checkKeyBytes(t, t)
}

func checkKeyBytes(key, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return nil
	case reflect.Array:
		return checkKeyBytes(key, t.Elem())
	case reflect.Struct:
		var end uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "_" {
				return fmt.Errorf("key type %v has a blank field at offset %d (name it: == ignores blank fields, the hash would not)", key, f.Offset)
			}
			if f.Offset != end {
				return fmt.Errorf("key type %v has %d padding bytes before field %s (widen the field before it, e.g. to uint32, or reorder fields so the key has no padding)", key, f.Offset-end, f.Name)
			}
			if err := checkKeyBytes(key, f.Type); err != nil {
				return err
			}
			end = f.Offset + f.Type.Size()
		}
		if end != t.Size() {
			return fmt.Errorf("key type %v has %d padding bytes at the end of %v (widen the last field or add a named one so the key has no padding)", key, t.Size()-end, t)
		}
		return nil
	default:
		return fmt.Errorf("key type %v holds a %v, which cannot be a CAM key (use integers, booleans, and arrays and structs of them)", key, t.Kind())
	}
}

// TransportKey is the retransmission engine's key: connection, window
// (request or data) and packet sequence number. Win is 32 bits wide so the
// key has no padding; at 12 bytes a bucket of four keys is one cache line.
type TransportKey struct {
	CID uint32
	Win uint32
	PSN uint32
}
