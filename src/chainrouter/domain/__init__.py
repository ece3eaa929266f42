"""Plain typed objects and rules shared by every layer; nothing here performs I/O."""
