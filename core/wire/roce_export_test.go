package wire

// LRHCRCForTest exposes lrhCRC to the external tests.
const LRHCRCForTest = uint32(lrhCRC)
