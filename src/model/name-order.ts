/**
 * localeCompare's order (the default locale's collation) for names and addresses, without starting ICU when it need
 * not: the first collator of a process loads ICU's data, a large part of a short run's start-up (`svc` on a snapshot).
 * In English's collation (ICU's root; also what V8 takes for the C and POSIX locales) the characters of Kubernetes
 * names and of IP addresses and ports each sort by one weight, in CHARACTER_ORDER, so comparing them character by
 * character gives the same order. Anything else (another character, another default locale: ICU reads LC_ALL,
 * LC_MESSAGES and LANG) is compared by the collator.
 */
const CHARACTER_ORDER = '_-:./0123456789abcdefghijklmnopqrstuvwxyz'
const RANK = new Uint8Array(128)
for (let i = 0; i < CHARACTER_ORDER.length; i++) RANK[CHARACTER_ORDER.charCodeAt(i)] = i + 1

let collator: Intl.Collator | undefined
let englishDefault: boolean | undefined

/** a.localeCompare(b)'s sign. */
export function compareNames(a: string, b: string): number {
  englishDefault ??= collatesAsEnglish(process.env.LC_ALL || process.env.LC_MESSAGES || process.env.LANG)
  if (englishDefault && ranked(a) && ranked(b)) {
    for (let i = 0; i < a.length && i < b.length; i++) {
      const d = RANK[a.charCodeAt(i)] - RANK[b.charCodeAt(i)]
      if (d !== 0) return d
    }
    return a.length - b.length
  }
  collator ??= new Intl.Collator()
  return collator.compare(a, b)
}

function ranked(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 128 || RANK[c] === 0) return false
  }
  return true
}

/** Whether ICU's default locale, named by the environment's locale (unset: C), collates as English. */
export function collatesAsEnglish(locale: string | undefined): boolean {
  return locale === undefined || /^(?:C|POSIX|en(?:_[A-Z]{2})?)(?:\.[\w-]+)?$/.test(locale)
}
