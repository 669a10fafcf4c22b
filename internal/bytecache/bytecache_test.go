package bytecache

import "testing"

func TestBound(t *testing.T) {
	c := New[string](10)
	c.Put("a", "A", 6)
	if v, ok := c.Get("a"); !ok || v != "A" {
		t.Fatal("a not cached")
	}
	c.Put("b", "B", 6) // over the bound: the cache is emptied first
	if _, ok := c.Get("a"); ok {
		t.Fatal("a survived a Put past the bound")
	}
	if v, ok := c.Get("b"); !ok || v != "B" {
		t.Fatal("b not cached")
	}
	c.Put("huge", "H", 11)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("a value larger than the bound was cached")
	}
	c.Put("b", "B2", 1) // present: kept as it was
	if v, _ := c.Get("b"); v != "B" {
		t.Fatalf("b replaced by %q", v)
	}
}
