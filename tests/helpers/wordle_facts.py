"""Wordle facts from the protocol sheet (§14.2), the independent reference the
tests hold the embedded server and the reference policy to."""

# §14.2.2: the 40 words of tweet_words.txt, in file order.
VOCABULARY = (
    "panic solar shire proxy point robot prick wince crimp knoll "
    "sugar whack mount perky could wrung light those moist shard "
    "pleat aloft skill elder frame humor pause ulcer ultra robin "
    "cynic aroma caulk shake dodge swill tacit other thorn trove"
).split()

# §14.2.3: the target of the first valid guess for seeds 0-24.
FIRST_TARGET = (
    "frame crimp proxy wrung wrung trove tacit pleat could robin tacit ultra cynic "
    "light prick perky elder shake whack shire knoll sugar crimp moist frame"
).split()
